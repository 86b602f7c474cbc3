//! `/sandboxes/{id}/connections` and `/sandboxes/{id}/ports` (Forge additions): what a
//! sandbox's network did, and its ports exposed on the host.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::Deserialize;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::Json;
use crate::manager::Manager;
use crate::wire;

#[derive(Debug, Deserialize)]
pub(crate) struct ConnectionsQuery {
    limit: Option<String>,
}

/// Outbound connection attempts of an allowlist sandbox, allowed and refused, oldest first.
#[utoipa::path(get, path = "/sandboxes/{id}/connections", tag = "sandboxes", params(("id" = String, Path), ("limit" = Option<u32>, Query)),
    responses((status = 200, body = [wire::Connection]), (status = 404, body = wire::ErrorBody)))]
pub(crate) async fn connections(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<ConnectionsQuery>,
) -> Result<axum::Json<Vec<wire::Connection>>, ApiError> {
    let manager = state.manager();
    // Destroyed sandboxes keep their log.
    if manager.store().get_sandbox(&id).await?.is_none() {
        return Err(ApiError::not_found(format!("sandbox {id:?} not found")));
    }
    let limit = query
        .limit
        .and_then(|l| l.parse::<i64>().ok())
        .filter(|l| *l > 0)
        .unwrap_or(1000)
        .min(100_000);
    manager.events().flush().await;
    let records = manager.store().connections(&id, limit).await?;
    Ok(axum::Json(
        records.into_iter().map(wire::Connection::from).collect(),
    ))
}

/// Expose a sandbox port on the host.
#[utoipa::path(post, path = "/sandboxes/{id}/ports", tag = "sandboxes", params(("id" = String, Path)), request_body = wire::ExposeRequest,
    responses((status = 201, body = wire::PortForward), (status = 400, body = wire::ErrorBody), (status = 404, body = wire::ErrorBody)))]
pub(crate) async fn expose_port(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Json(request): Json<wire::ExposeRequest>,
) -> Result<(StatusCode, axum::Json<wire::PortForward>), ApiError> {
    let manager = state.manager();
    manager.live(&id).await?;
    let sandbox = Manager::parse_id(&id)?;
    if request.port == 0 {
        return Err(ApiError::field("port", "must be from 1 to 65535"));
    }
    let host =
        std::net::SocketAddr::new(manager.config().port_bind, request.host_port.unwrap_or(0));
    let forward = manager
        .backend()
        .expose_port(&sandbox, request.port, host)
        .await?;
    manager.events().publish(
        "sandbox.port_exposed",
        Some(&id),
        Some(serde_json::json!({"port": forward.port, "host_address": forward.host_address})),
    );
    Ok((StatusCode::CREATED, axum::Json(forward.into())))
}

/// The sandbox's exposed ports.
#[utoipa::path(get, path = "/sandboxes/{id}/ports", tag = "sandboxes", params(("id" = String, Path)),
    responses((status = 200, body = [wire::PortForward]), (status = 404, body = wire::ErrorBody)))]
pub(crate) async fn list_ports(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<axum::Json<Vec<wire::PortForward>>, ApiError> {
    state.manager().live(&id).await?;
    let sandbox = Manager::parse_id(&id)?;
    let ports = state.manager().backend().ports(&sandbox).await?;
    Ok(axum::Json(ports.into_iter().map(Into::into).collect()))
}

/// Stop exposing a sandbox port.
#[utoipa::path(delete, path = "/sandboxes/{id}/ports/{port}", tag = "sandboxes", params(("id" = String, Path), ("port" = u16, Path)),
    responses((status = 204), (status = 404, body = wire::ErrorBody)))]
pub(crate) async fn remove_port(
    State(state): State<AppState>,
    Path((id, port)): Path<(String, u16)>,
) -> Result<StatusCode, ApiError> {
    state.manager().live(&id).await?;
    let sandbox = Manager::parse_id(&id)?;
    let exposed = state.manager().backend().ports(&sandbox).await?;
    if !exposed.iter().any(|f| f.port == port) {
        return Err(ApiError::not_found(format!(
            "port {port} of sandbox {id:?} is not exposed"
        )));
    }
    state
        .manager()
        .backend()
        .unexpose_port(&sandbox, port)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
