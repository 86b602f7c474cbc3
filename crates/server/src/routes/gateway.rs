//! `/sessions…`, `/tools…` and `/ledger`: the tool gateway over HTTP. Handlers translate; the
//! gateway validates, decides, runs and records.
//!
//! A tool call answers `200` with the reply when the tool ran (its `outcome` is `ok` or
//! `failed`), and otherwise an error body that also carries the recorded reply:
//! `400 BAD_REQUEST` naming the field for invalid arguments, `403 POLICY_DENIED` with the
//! decision and rule for a denial, `409 APPROVAL_REQUIRED` when the policy asks for a person.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use forge_gateway::{Outcome, SessionRequest, ToolReply};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::AppState;
use crate::error::{ApiError, Code};
use crate::extract::{Json, OptionalJson};

/// Most ledger entries one request returns.
const LEDGER_LIMIT: u32 = 10_000;

/// Opens a session: the policy in the body, narrowed by the operator's ceilings.
#[utoipa::path(post, path = "/sessions", tag = "gateway",
    responses((status = 201, description = "the session, with its effective policy"),
        (status = 400, description = "invalid policy"), (status = 404, description = "no such sandbox to attach to")))]
pub(crate) async fn create(
    State(state): State<AppState>,
    OptionalJson(request): OptionalJson<SessionRequest>,
) -> Result<(StatusCode, axum::Json<forge_gateway::SessionInfo>), ApiError> {
    let info = state.gateway().create_session(request).await?;
    Ok((StatusCode::CREATED, axum::Json(info)))
}

/// A session's state.
#[utoipa::path(get, path = "/sessions/{id}", tag = "gateway", params(("id" = String, Path)),
    responses((status = 200, description = "the session"), (status = 404, description = "unknown session")))]
pub(crate) async fn get(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<axum::Json<forge_gateway::SessionInfo>, ApiError> {
    Ok(axum::Json(state.gateway().session(&id).await?))
}

/// Closes a session, destroying the sandbox it created.
#[utoipa::path(delete, path = "/sessions/{id}", tag = "gateway", params(("id" = String, Path)),
    responses((status = 200, description = "the closed session"), (status = 404, description = "unknown or closed session")))]
pub(crate) async fn close(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<axum::Json<forge_gateway::SessionInfo>, ApiError> {
    Ok(axum::Json(state.gateway().close(&id).await?))
}

/// Stops every process of the session and empties its writable directories (the
/// `session_reset` tool, judged and recorded like any call).
#[utoipa::path(post, path = "/sessions/{id}/reset", tag = "gateway", params(("id" = String, Path)),
    responses((status = 200, description = "the reply"), (status = 404, description = "unknown session")))]
pub(crate) async fn reset(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    Ok(reply_response(state.gateway().reset(&id).await?))
}

/// Files the session exported.
#[utoipa::path(get, path = "/sessions/{id}/artifacts", tag = "gateway", params(("id" = String, Path)),
    responses((status = 200, description = "artifact paths and sizes"), (status = 404, description = "unknown session")))]
pub(crate) async fn artifacts(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<axum::Json<Vec<forge_gateway::Artifact>>, ApiError> {
    Ok(axum::Json(state.gateway().artifacts(&id).await?))
}

#[derive(Debug, Deserialize)]
pub(crate) struct ToolsQuery {
    session: Option<String>,
}

/// Tools with their JSON Schemas; with `?session=`, only those the session may call.
#[utoipa::path(get, path = "/tools", tag = "gateway", params(("session" = Option<String>, Query)),
    responses((status = 200, description = "tool names, descriptions and input schemas"), (status = 404, description = "unknown session")))]
pub(crate) async fn tools(
    State(state): State<AppState>,
    Query(query): Query<ToolsQuery>,
) -> Result<axum::Json<Vec<forge_types::ToolSpec>>, ApiError> {
    let specs = match query.session {
        Some(id) => state.gateway().session_tools(&id).await?,
        None => state.gateway().tools(),
    };
    Ok(axum::Json(specs))
}

/// A tool call: the session, the tool's arguments (a JSON object; `{}` when absent), and
/// an optional idempotency key (also accepted as the `Idempotency-Key` header).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CallBody {
    session_id: String,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    arguments: Option<Value>,
    idempotency_key: Option<String>,
}

/// Calls a tool in a session: validate, decide, run, record.
#[utoipa::path(post, path = "/tools/{tool}", tag = "gateway", params(("tool" = String, Path)),
    responses((status = 200, description = "the tool ran; the reply"),
        (status = 400, description = "invalid arguments, naming the field"),
        (status = 403, description = "POLICY_DENIED, with the decision and rule"),
        (status = 404, description = "unknown session"),
        (status = 409, description = "APPROVAL_REQUIRED")))]
pub(crate) async fn call(
    State(state): State<AppState>,
    Path(tool): Path<String>,
    headers: HeaderMap,
    Json(body): Json<CallBody>,
) -> Result<Response, ApiError> {
    let key = body.idempotency_key.or_else(|| {
        headers
            .get("idempotency-key")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    });
    let arguments = body.arguments.unwrap_or_else(|| json!({}));
    let reply = state
        .gateway()
        .call(&body.session_id, &tool, arguments, key)
        .await?;
    Ok(reply_response(reply))
}

/// A reply as an HTTP answer: 200 when the tool ran, an error body carrying the reply
/// otherwise.
fn reply_response(reply: ToolReply) -> Response {
    let code = match reply.outcome {
        Outcome::Ok | Outcome::Failed => return axum::Json(reply).into_response(),
        Outcome::Invalid => Code::BadRequest,
        Outcome::Denied => Code::PolicyDenied,
        Outcome::Pending => Code::ApprovalRequired,
    };
    let body = json!({
        "code": code.as_str(),
        "message": reply.text(),
        "field": reply.error.as_ref().and_then(|e| e.field.clone()),
        "decision": reply.decision,
        "rule": reply.rule,
        "reason": reply.reason,
        "reply": reply,
    });
    (code.status(), axum::Json(body)).into_response()
}

#[derive(Debug, Deserialize)]
pub(crate) struct LedgerQuery {
    session: Option<String>,
    limit: Option<u32>,
}

/// The last ledger entries (oldest first), of one session or all.
#[utoipa::path(get, path = "/ledger", tag = "gateway",
    params(("session" = Option<String>, Query), ("limit" = Option<u32>, Query)),
    responses((status = 200, description = "ledger entries"), (status = 401, description = "API key missing")))]
pub(crate) async fn ledger(
    State(state): State<AppState>,
    Query(query): Query<LedgerQuery>,
) -> Result<axum::Json<Vec<forge_gateway::LedgerEntry>>, ApiError> {
    let limit = query.limit.unwrap_or(100).min(LEDGER_LIMIT);
    let entries = state
        .gateway()
        .ledger(query.session.as_deref(), limit)
        .await?;
    Ok(axum::Json(entries))
}
