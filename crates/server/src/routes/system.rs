//! Health, metrics, providers, snapshots and the pool.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::IntoResponse;
use forge_types::units::GoDuration;

use crate::AppState;
use crate::error::ApiError;
use crate::manager::PROVIDER;
use crate::wire;

/// The server is up.
#[utoipa::path(get, path = "/health", tag = "system", responses((status = 200, body = wire::Health)))]
pub(crate) async fn health(State(state): State<AppState>) -> axum::Json<wire::Health> {
    axum::Json(wire::Health {
        status: "ok".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        uptime: GoDuration(std::time::Duration::from_secs(state.uptime().as_secs())).to_string(),
    })
}

/// ForgeVM's JSON metrics.
#[utoipa::path(get, path = "/metrics", tag = "system", responses((status = 200, body = wire::Metrics)))]
pub(crate) async fn metrics_json(
    State(state): State<AppState>,
) -> Result<axum::Json<wire::Metrics>, ApiError> {
    let counts = state.manager().store().sandbox_counts().await?;
    Ok(axum::Json(wire::Metrics {
        goroutines: tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks() as u64,
        memory_alloc: resident_bytes(),
        active_sandboxes: u64::try_from(counts.active).unwrap_or(0),
        total_sandboxes: u64::try_from(counts.total).unwrap_or(0),
    }))
}

/// Prometheus text metrics (at `/metrics`, outside `/api/v1`).
pub(crate) async fn prometheus(
    State(state): State<AppState>,
) -> Result<impl IntoResponse, ApiError> {
    let counts = state.manager().store().sandbox_counts().await?;
    let body = state.manager().metrics().prometheus(
        u64::try_from(counts.active).unwrap_or(0),
        &state.manager().warm(),
        state.uptime(),
    );
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body))
}

/// This process's resident memory.
fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

fn provider_info() -> wire::ProviderInfo {
    wire::ProviderInfo {
        name: PROVIDER.to_owned(),
        healthy: true,
        default: true,
    }
}

/// Sandbox providers (Forge has one: the Linux jail).
#[utoipa::path(get, path = "/providers", tag = "system", responses((status = 200, body = [wire::ProviderInfo])))]
pub(crate) async fn providers() -> axum::Json<Vec<wire::ProviderInfo>> {
    axum::Json(vec![provider_info()])
}

/// One provider.
#[utoipa::path(get, path = "/providers/{name}", tag = "system", params(("name" = String, Path)),
    responses((status = 200, body = wire::ProviderDetail), (status = 404, body = wire::ErrorBody)))]
pub(crate) async fn provider(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<axum::Json<wire::ProviderDetail>, ApiError> {
    if name != PROVIDER {
        return Err(ApiError::not_found("provider not found"));
    }
    let counts = state.manager().store().sandbox_counts().await?;
    let config = BTreeMap::from([
        ("type".to_owned(), "other".to_owned()),
        (
            "isolation".to_owned(),
            "namespaces, overlayfs, cgroups, seccomp, landlock".to_owned(),
        ),
    ]);
    Ok(axum::Json(wire::ProviderDetail {
        name: PROVIDER.to_owned(),
        healthy: true,
        default: true,
        sandbox_count: u64::try_from(counts.active).unwrap_or(0),
        config,
    }))
}

/// Check every provider.
#[utoipa::path(post, path = "/providers/test", tag = "system", responses((status = 200, body = BTreeMap<String, bool>)))]
pub(crate) async fn test_providers(
    State(state): State<AppState>,
) -> axum::Json<BTreeMap<String, bool>> {
    // The backend answers listings only while its helper process is alive and talking.
    let healthy = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        state.manager().backend().list(),
    )
    .await
    .is_ok();
    axum::Json(BTreeMap::from([(PROVIDER.to_owned(), healthy)]))
}

/// Images made from sandboxes (`POST /sandboxes/{id}/snapshot`), oldest first.
#[utoipa::path(get, path = "/snapshots", tag = "system", responses((status = 200, body = [wire::SnapshotSummary])))]
pub(crate) async fn snapshots(
    State(state): State<AppState>,
) -> Result<axum::Json<Vec<wire::SnapshotSummary>>, ApiError> {
    let Some(store) = state.manager().backend().images() else {
        return Ok(axum::Json(Vec::new()));
    };
    let images = tokio::task::spawn_blocking(move || store.list())
        .await
        .map_err(|e| ApiError::internal("list snapshots", &e))?
        .map_err(ApiError::from)?;
    let mut snapshots: Vec<(jiff::Timestamp, wire::SnapshotSummary)> = images
        .into_iter()
        .filter(|i| matches!(i.source, forge_types::ImageSource::Snapshot { .. }))
        .map(|i| {
            (
                i.created_at,
                wire::SnapshotSummary {
                    image: i.name(),
                    provider: PROVIDER.to_owned(),
                    created_at: i.created_at.to_string(),
                },
            )
        })
        .collect();
    snapshots.sort_by_key(|(at, _)| *at);
    Ok(axum::Json(snapshots.into_iter().map(|(_, s)| s).collect()))
}

/// The live-sandbox cap and the warm pools.
#[utoipa::path(get, path = "/pool/status", tag = "system", responses((status = 200, body = wire::PoolStatus)))]
pub(crate) async fn pool_status(
    State(state): State<AppState>,
) -> Result<axum::Json<wire::PoolStatus>, ApiError> {
    let manager = state.manager();
    let warm: BTreeMap<String, u64> = manager.warm().into_iter().collect();
    let Some(max) = manager.config().max_sandboxes else {
        return Ok(axum::Json(wire::PoolStatus {
            enabled: false,
            vms: None,
            max_vms: None,
            total_users: None,
            max_users_per_vm: None,
            overflow: None,
            queued: None,
            warm,
        }));
    };
    let active = u64::try_from(manager.store().sandbox_counts().await?.active).unwrap_or(0);
    Ok(axum::Json(wire::PoolStatus {
        enabled: true,
        vms: Some(active),
        max_vms: Some(max as u64),
        total_users: Some(active),
        max_users_per_vm: Some(1),
        overflow: Some(manager.config().overflow.as_str().to_owned()),
        queued: Some(manager.queued() as u64),
        warm,
    }))
}
