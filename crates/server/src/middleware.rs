//! Request-wide behaviour: request ids, API-key authentication, status counting.

use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::AppState;
use crate::error::{ApiError, Code};

pub(crate) static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Echoes `X-Request-ID`, or makes one up, on every response.
pub(crate) async fn request_id(mut request: Request, next: Next) -> Response {
    let id = request
        .headers()
        .get(&REQUEST_ID)
        .filter(|v| !v.is_empty() && v.len() <= 200)
        .cloned()
        .unwrap_or_else(|| {
            HeaderValue::from_str(&uuid::Uuid::new_v4().to_string())
                .unwrap_or(HeaderValue::from_static("-"))
        });
    request.headers_mut().insert(REQUEST_ID.clone(), id.clone());
    let mut response = next.run(request).await;
    response.headers_mut().insert(REQUEST_ID.clone(), id);
    response
}

/// Requires the API key (in `X-API-Key`, or as a bearer token) when one is configured.
pub(crate) async fn authenticate(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let Some(expected) = state.config().api_key.as_deref() else {
        return next.run(request).await;
    };
    let headers = request.headers();
    let given = headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .or_else(|| {
            headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
        })
        .unwrap_or("");
    if bool::from(given.as_bytes().ct_eq(expected.as_bytes())) {
        next.run(request).await
    } else {
        ApiError::new(Code::Unauthorized, "invalid or missing API key").into_response()
    }
}

/// Counts responses by status class for `/metrics`.
pub(crate) async fn count(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    state
        .manager()
        .metrics()
        .record_status(response.status().as_u16());
    response
}
