//! `/templates…`: sandbox templates, spawning from them, and their warm pools.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use forge_store::TemplateRecord;
use serde::Deserialize;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Json, OptionalJson};
use crate::time::{now_ms, rfc3339};
use crate::wire;

/// A template as clients send it: ForgeVM's server keys, plus the keys its Python SDK's
/// `TemplateManager.save` sends instead (`vcpus`, `ttl`), which ForgeVM silently dropped.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct TemplateInput {
    name: String,
    version: i64,
    image: String,
    description: String,
    setup: Vec<String>,
    allowed_hosts: Vec<String>,
    memory_mb: i64,
    cpu_cores: i64,
    vcpus: i64,
    ttl_seconds: i64,
    /// A Go duration, instead of `ttl_seconds`.
    ttl: String,
    env: BTreeMap<String, String>,
    secrets: Vec<wire::TemplateSecret>,
    pool_size: i64,
}

/// Template names become pool keys and URL segments.
fn valid_name(name: &str) -> Result<(), ApiError> {
    if name.is_empty() {
        return Err(ApiError::bad_request("template name is required"));
    }
    if name.len() > 128
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
    {
        return Err(ApiError::field(
            "name",
            format!("{name:?} must be 1-128 letters, digits, '-', '_', '.' or ':'"),
        ));
    }
    Ok(())
}

fn to_record(
    input: TemplateInput,
    name: String,
    created_at_ms: i64,
) -> Result<TemplateRecord, ApiError> {
    valid_name(&name)?;
    if input.image.is_empty() {
        return Err(ApiError::bad_request("template image is required"));
    }
    for (field, value) in [
        ("memory_mb", input.memory_mb),
        ("cpu_cores", input.cpu_cores),
        ("vcpus", input.vcpus),
        ("ttl_seconds", input.ttl_seconds),
        ("pool_size", input.pool_size),
    ] {
        if value < 0 {
            return Err(ApiError::field(field, "must not be negative"));
        }
    }
    if input.pool_size > 64 {
        return Err(ApiError::field(
            "pool_size",
            "at most 64 warm sandboxes per template",
        ));
    }
    let ttl_seconds = match super::sandboxes::ttl_field("ttl", &input.ttl)? {
        Some(ttl) if input.ttl_seconds == 0 => i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX),
        _ => input.ttl_seconds,
    };
    let or = |value: i64, default: i64| if value > 0 { value } else { default };
    Ok(TemplateRecord {
        name,
        version: or(input.version, 1),
        image: input.image,
        description: Some(input.description).filter(|d| !d.is_empty()),
        setup: input.setup,
        allowed_hosts: input.allowed_hosts,
        memory_mb: or(input.memory_mb, 512),
        cpu_cores: or(input.cpu_cores, or(input.vcpus, 1)),
        ttl_seconds: or(ttl_seconds, 300),
        env: input.env,
        secrets: serde_json::to_value(&input.secrets).unwrap_or(serde_json::Value::Null),
        pool_size: input.pool_size,
        created_at_ms,
        updated_at_ms: now_ms(),
    })
}

fn to_wire(record: &TemplateRecord) -> wire::Template {
    wire::Template {
        name: record.name.clone(),
        version: record.version,
        image: record.image.clone(),
        description: record.description.clone().unwrap_or_default(),
        setup: record.setup.clone(),
        allowed_hosts: record.allowed_hosts.clone(),
        memory_mb: record.memory_mb,
        cpu_cores: record.cpu_cores,
        ttl_seconds: record.ttl_seconds,
        env: record.env.clone(),
        secrets: serde_json::from_value(record.secrets.clone()).unwrap_or_default(),
        pool_size: record.pool_size,
        created_at: rfc3339(record.created_at_ms),
        updated_at: rfc3339(record.updated_at_ms),
    }
}

/// Create a template (and its warm pool when `pool_size` > 0).
#[utoipa::path(post, path = "/templates", tag = "templates", request_body = TemplateInput,
    responses((status = 201, body = wire::Template), (status = 400, body = wire::ErrorBody), (status = 409, body = wire::ErrorBody)))]
pub(crate) async fn create(
    State(state): State<AppState>,
    Json(input): Json<TemplateInput>,
) -> Result<(StatusCode, axum::Json<wire::Template>), ApiError> {
    let name = input.name.clone();
    let record = to_record(input, name, now_ms())?;
    state.manager().store().insert_template(&record).await?;
    state
        .manager()
        .configure_pool(Some(&record), &record.name)
        .await;
    state.manager().events().publish(
        "template.created",
        None,
        Some(serde_json::json!({"name": record.name})),
    );
    Ok((StatusCode::CREATED, axum::Json(to_wire(&record))))
}

/// List templates by name.
#[utoipa::path(get, path = "/templates", tag = "templates", responses((status = 200, body = [wire::Template])))]
pub(crate) async fn list(
    State(state): State<AppState>,
) -> Result<axum::Json<Vec<wire::Template>>, ApiError> {
    let templates = state.manager().store().list_templates().await?;
    Ok(axum::Json(templates.iter().map(to_wire).collect()))
}

/// One template.
#[utoipa::path(get, path = "/templates/{name}", tag = "templates", params(("name" = String, Path)),
    responses((status = 200, body = wire::Template), (status = 404, body = wire::ErrorBody)))]
pub(crate) async fn get(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<axum::Json<wire::Template>, ApiError> {
    let record = state
        .manager()
        .store()
        .get_template(&name)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("template {name:?} not found")))?;
    Ok(axum::Json(to_wire(&record)))
}

/// Replace a template (the name comes from the URL).
#[utoipa::path(put, path = "/templates/{name}", tag = "templates", params(("name" = String, Path)), request_body = TemplateInput,
    responses((status = 200, body = wire::Template), (status = 404, body = wire::ErrorBody)))]
pub(crate) async fn update(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Json(input): Json<TemplateInput>,
) -> Result<axum::Json<wire::Template>, ApiError> {
    let store = state.manager().store();
    let existing = store
        .get_template(&name)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("template {name:?} not found")))?;
    let mut record = to_record(input, name.clone(), existing.created_at_ms)?;
    if record.version <= existing.version {
        record.version = existing.version + 1;
    }
    if !store.update_template(&record).await? {
        return Err(ApiError::not_found(format!("template {name:?} not found")));
    }
    state.manager().configure_pool(Some(&record), &name).await;
    Ok(axum::Json(to_wire(&record)))
}

/// Delete a template (and its warm pool).
#[utoipa::path(delete, path = "/templates/{name}", tag = "templates", params(("name" = String, Path)),
    responses((status = 200, body = wire::Status), (status = 404, body = wire::ErrorBody)))]
pub(crate) async fn delete(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<axum::Json<wire::Status>, ApiError> {
    let record = state.manager().store().get_template(&name).await?;
    if !state.manager().store().delete_template(&name).await? {
        return Err(ApiError::not_found(format!("template {name:?} not found")));
    }
    state.manager().configure_pool(None, &name).await;
    if let Some(record) = record {
        state.manager().forget_template(&record).await;
    }
    Ok(axum::Json(wire::Status::new("deleted")))
}

/// Spawn a sandbox from a template (a hand-off when it has a warm pool).
#[utoipa::path(post, path = "/templates/{name}/spawn", tag = "templates", params(("name" = String, Path)), request_body = wire::TemplateSpawn,
    responses((status = 201, body = wire::Sandbox), (status = 404, body = wire::ErrorBody), (status = 503, body = wire::ErrorBody)))]
pub(crate) async fn spawn(
    State(state): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    OptionalJson(request): OptionalJson<wire::TemplateSpawn>,
) -> Result<(StatusCode, axum::Json<wire::Sandbox>), ApiError> {
    let spawn = wire::SpawnRequest {
        provider: request.provider,
        ttl: request.ttl,
        template: name,
        ..wire::SpawnRequest::default()
    };
    let params = super::sandboxes::spawn_params(&spawn, &headers)?;
    let record = state.manager().spawn(params).await?;
    Ok((
        StatusCode::CREATED,
        axum::Json(super::sandboxes::to_wire(&record)),
    ))
}
