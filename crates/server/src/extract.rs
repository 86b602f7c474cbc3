//! Extractors that answer bad input the API's way: a JSON `{"code","message"}` body
//! naming the field at fault, `413 TOO_LARGE` for oversized bodies.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::error::{ApiError, Code};

/// A JSON request body; unknown fields are ignored (as ForgeVM's clients expect).
#[derive(Debug)]
pub(crate) struct Json<T>(pub(crate) T);

impl<S, T> FromRequest<S> for Json<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = body_bytes(request, state).await?;
        parse(&bytes).map(Json)
    }
}

/// A JSON body that may be absent or empty (then `T::default()`).
#[derive(Debug)]
pub(crate) struct OptionalJson<T>(pub(crate) T);

impl<S, T> FromRequest<S> for OptionalJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned + Default,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = body_bytes(request, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJson(T::default()));
        }
        parse(&bytes).map(OptionalJson)
    }
}

/// A raw body (file uploads).
#[derive(Debug)]
pub(crate) struct RawBody(pub(crate) Bytes);

impl<S> FromRequest<S> for RawBody
where
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        body_bytes(request, state).await.map(RawBody)
    }
}

async fn body_bytes<S: Send + Sync>(request: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(request, state)
        .await
        .map_err(|rejection: BytesRejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(
                    Code::TooLarge,
                    "request body is larger than the server accepts",
                )
            } else {
                ApiError::bad_request(format!(
                    "cannot read the request body: {}",
                    rejection.body_text()
                ))
            }
        })
}

fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(&mut deserializer).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if path.is_empty() || path == "." || path == "?" {
            ApiError::bad_request(format!("invalid request body: {inner}"))
        } else {
            ApiError::bad_request(format!("invalid request body: {path}: {inner}"))
        }
    })
}
