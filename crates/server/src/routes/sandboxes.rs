//! `/sandboxes`: create, list, get, extend, destroy, prune, logs.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use forge_store::SandboxRecord;
use forge_types::units::{GoDuration, parse_duration};
use serde::Deserialize;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Json, OptionalJson};
use crate::manager::{Manager, PROVIDER, SpawnParams};
use crate::time::rfc3339;
use crate::wire;

/// The wire form of a stored sandbox.
pub(crate) fn to_wire(record: &SandboxRecord) -> wire::Sandbox {
    wire::Sandbox {
        id: record.id.clone(),
        state: record.state.clone(),
        provider: record.provider.clone(),
        image: record.image.clone(),
        memory_mb: u64::try_from(record.memory_mb).unwrap_or(0),
        vcpus: u64::try_from(record.vcpus).unwrap_or(0),
        owner_id: record.owner_id.clone(),
        created_at: rfc3339(record.created_at_ms),
        expires_at: rfc3339(record.expires_at_ms),
        metadata: record.metadata.clone(),
        degraded: Vec::new(),
    }
}

/// A Go duration from a request field; `None` when empty.
pub(crate) fn ttl_field(field: &str, text: &str) -> Result<Option<std::time::Duration>, ApiError> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    parse_duration(text)
        .map(Some)
        .map_err(|err| ApiError::field(field, err))
}

/// Reads a spawn request (shared with template spawns).
pub(crate) fn spawn_params(
    request: &wire::SpawnRequest,
    headers: &HeaderMap,
) -> Result<SpawnParams, ApiError> {
    if !request.provider.is_empty() && request.provider != PROVIDER {
        return Err(ApiError::field(
            "provider",
            format!(
                "unknown provider {:?}; this server has {PROVIDER:?}",
                request.provider
            ),
        ));
    }
    let positive = |field: &str, value: i64| -> Result<Option<u64>, ApiError> {
        match value {
            0 => Ok(None),
            v if v < 0 => Err(ApiError::field(field, "must not be negative")),
            v => Ok(Some(v.cast_unsigned())),
        }
    };
    let owner = headers
        .get("x-user-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| Some(request.owner_id.clone()))
        .filter(|o| !o.is_empty());
    Ok(SpawnParams {
        image: Some(request.image.clone()).filter(|i| !i.is_empty()),
        memory_mb: positive("memory_mb", request.memory_mb)?,
        vcpus: positive("vcpus", request.vcpus)?,
        ttl: ttl_field("ttl", &request.ttl)?,
        owner_id: owner,
        metadata: request.metadata.clone(),
        template: Some(request.template.clone()).filter(|t| !t.is_empty()),
        network: match request.network.as_str() {
            "" => None,
            mode => Some(
                mode.parse::<forge_types::NetworkMode>()
                    .map_err(|err| ApiError::field("network", err.reason))?,
            ),
        },
        allowed_hosts: request.allowed_hosts.clone(),
    })
}

/// Create a sandbox.
#[utoipa::path(post, path = "/sandboxes", tag = "sandboxes", request_body = wire::SpawnRequest,
    responses((status = 201, body = wire::Sandbox), (status = 400, body = wire::ErrorBody), (status = 503, description = "the pool is full", body = wire::ErrorBody)))]
pub(crate) async fn create(
    State(state): State<AppState>,
    headers: HeaderMap,
    Json(request): Json<wire::SpawnRequest>,
) -> Result<(StatusCode, axum::Json<wire::Sandbox>), ApiError> {
    let params = spawn_params(&request, &headers)?;
    let record = state.manager().spawn(params).await?;
    Ok((StatusCode::CREATED, axum::Json(to_wire(&record))))
}

/// List live sandboxes, newest first.
#[utoipa::path(get, path = "/sandboxes", tag = "sandboxes", responses((status = 200, body = [wire::Sandbox])))]
pub(crate) async fn list(
    State(state): State<AppState>,
) -> Result<axum::Json<Vec<wire::Sandbox>>, ApiError> {
    let records = state.manager().store().list_sandboxes(false).await?;
    Ok(axum::Json(records.iter().map(to_wire).collect()))
}

/// Destroy every sandbox whose TTL has passed.
#[utoipa::path(delete, path = "/sandboxes", tag = "sandboxes", responses((status = 200, body = wire::Pruned)))]
pub(crate) async fn prune(
    State(state): State<AppState>,
) -> Result<axum::Json<wire::Pruned>, ApiError> {
    let pruned = state.manager().reap().await?;
    Ok(axum::Json(wire::Pruned { pruned }))
}

/// One sandbox.
#[utoipa::path(get, path = "/sandboxes/{id}", tag = "sandboxes", params(("id" = String, Path)),
    responses((status = 200, body = wire::Sandbox), (status = 404, body = wire::ErrorBody)))]
pub(crate) async fn get(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<axum::Json<wire::Sandbox>, ApiError> {
    let record = state.manager().live(&id).await?;
    Ok(axum::Json(to_wire(&record)))
}

/// Destroy a sandbox (idempotent: an unknown or destroyed one also answers 200).
#[utoipa::path(delete, path = "/sandboxes/{id}", tag = "sandboxes", params(("id" = String, Path)), responses((status = 200, body = wire::Status)))]
pub(crate) async fn destroy(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<axum::Json<wire::Status>, ApiError> {
    if Manager::parse_id(&id).is_ok() {
        state.manager().destroy(&id, "destroyed by request").await?;
    }
    Ok(axum::Json(wire::Status::new("destroyed")))
}

/// Set the sandbox to expire `ttl` from now.
#[utoipa::path(post, path = "/sandboxes/{id}/extend", tag = "sandboxes", params(("id" = String, Path)), request_body = wire::ExtendRequest,
    responses((status = 200, body = wire::Sandbox), (status = 400, body = wire::ErrorBody), (status = 404, body = wire::ErrorBody)))]
pub(crate) async fn extend(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Json(request): Json<wire::ExtendRequest>,
) -> Result<axum::Json<wire::Sandbox>, ApiError> {
    let ttl =
        ttl_field("ttl", &request.ttl)?.ok_or_else(|| ApiError::bad_request("ttl is required"))?;
    if ttl.is_zero() {
        return Err(ApiError::field("ttl", "must be positive"));
    }
    let record = state.manager().extend(&id, ttl).await?;
    Ok(axum::Json(to_wire(&record)))
}

#[derive(Debug, Deserialize)]
pub(crate) struct LogsQuery {
    lines: Option<String>,
}

/// The sandbox's command log, newest last.
#[utoipa::path(get, path = "/sandboxes/{id}/logs", tag = "sandboxes", params(("id" = String, Path), ("lines" = Option<u32>, Query)),
    responses((status = 200, body = [String])))]
pub(crate) async fn logs(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<LogsQuery>,
) -> Result<axum::Json<Vec<String>>, ApiError> {
    state.manager().live(&id).await?;
    let lines = query
        .lines
        .and_then(|l| l.parse::<i64>().ok())
        .filter(|l| *l > 0)
        .unwrap_or(100)
        .min(10_000);
    let entries = state.manager().store().exec_log(&id, lines).await?;
    Ok(axum::Json(
        entries
            .iter()
            .map(|e| {
                let duration = GoDuration(std::time::Duration::from_micros(
                    u64::try_from(e.duration_us).unwrap_or(0),
                ));
                let mut line = format!(
                    "{} exec {:?} exit {} in {duration}",
                    rfc3339(e.started_at_ms),
                    e.command,
                    e.exit_code
                );
                if e.timed_out {
                    line.push_str(" (timed out)");
                }
                if e.oom_killed {
                    line.push_str(" (out of memory)");
                }
                line
            })
            .collect(),
    ))
}

/// Save the sandbox's file system as an image (a Forge addition); the sandbox keeps running.
#[utoipa::path(post, path = "/sandboxes/{id}/snapshot", tag = "sandboxes", params(("id" = String, Path)), request_body = wire::SnapshotRequest,
    responses((status = 201, body = wire::Image), (status = 400, body = wire::ErrorBody), (status = 404, body = wire::ErrorBody)))]
pub(crate) async fn snapshot(
    State(state): State<AppState>,
    Path(id): Path<String>,
    OptionalJson(request): OptionalJson<wire::SnapshotRequest>,
) -> Result<(StatusCode, axum::Json<wire::Image>), ApiError> {
    let record = state.manager().live(&id).await?;
    let sandbox = Manager::parse_id(&id)?;
    let name = if request.name.trim().is_empty() {
        format!("snapshot/{}:{}", record.id, crate::time::now_ms() / 1000)
    } else {
        request.name.trim().to_owned()
    };
    let image = state.manager().backend().snapshot(&sandbox, &name).await?;
    state.manager().events().publish(
        "sandbox.snapshot",
        Some(&record.id),
        Some(serde_json::json!({"image": image.name, "layers": image.layers})),
    );
    Ok((StatusCode::CREATED, axum::Json(image.into())))
}

/// Start a new sandbox from a copy-on-write copy of this one's file system (a Forge
/// addition); writes on either side stay on that side.
#[utoipa::path(post, path = "/sandboxes/{id}/fork", tag = "sandboxes", params(("id" = String, Path)), request_body = wire::ForkRequest,
    responses((status = 201, body = wire::Sandbox), (status = 400, body = wire::ErrorBody), (status = 404, body = wire::ErrorBody), (status = 503, body = wire::ErrorBody)))]
pub(crate) async fn fork(
    State(state): State<AppState>,
    Path(id): Path<String>,
    OptionalJson(request): OptionalJson<wire::ForkRequest>,
) -> Result<(StatusCode, axum::Json<wire::Sandbox>), ApiError> {
    let ttl = ttl_field("ttl", &request.ttl)?;
    let record = state.manager().fork(&id, ttl).await?;
    Ok((StatusCode::CREATED, axum::Json(to_wire(&record))))
}
