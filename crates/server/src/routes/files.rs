//! `/sandboxes/{id}/files…`: the file API. Paths resolve inside the sandbox; relative ones
//! under `/workspace`.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use forge_types::{FileInfo, FileKind};
use serde::Deserialize;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Json, RawBody};
use crate::manager::Manager;
use crate::time::rfc3339;
use crate::wire;

/// Go's `os.ModeDir` and `os.ModeSymlink`, which ForgeVM's `mode` strings carry.
const GO_MODE_DIR: u64 = 1 << 31;
const GO_MODE_SYMLINK: u64 = 1 << 27;

pub(crate) fn info_to_wire(info: &FileInfo) -> wire::FileInfo {
    let kind_bits = match info.kind {
        FileKind::Dir => GO_MODE_DIR,
        FileKind::Symlink => GO_MODE_SYMLINK,
        FileKind::File | FileKind::Other => 0,
    };
    wire::FileInfo {
        path: info.path.clone(),
        size: info.size,
        mode: format!("{:o}", kind_bits | u64::from(info.mode)),
        is_dir: info.kind == FileKind::Dir,
        mod_time: rfc3339(info.modified_ms),
        name: info.name.clone(),
    }
}

/// An octal mode string (`0644`, `755`).
fn parse_mode(field: &str, text: &str) -> Result<u32, ApiError> {
    let digits = text.trim().trim_start_matches("0o");
    u32::from_str_radix(digits, 8)
        .ok()
        .filter(|m| *m <= 0o7777)
        .ok_or_else(|| {
            ApiError::field(field, format!("{text:?} is not an octal mode such as 0644"))
        })
}

fn required<'a>(value: Option<&'a str>, name: &str) -> Result<&'a str, ApiError> {
    value
        .filter(|v| !v.is_empty())
        .ok_or_else(|| ApiError::bad_request(format!("{name} query parameter required")))
}

#[derive(Debug, Deserialize)]
pub(crate) struct PathQuery {
    path: Option<String>,
    recursive: Option<String>,
    mode: Option<String>,
}

/// Write a text file (parents are created).
#[utoipa::path(post, path = "/sandboxes/{id}/files", tag = "files", params(("id" = String, Path)), request_body = wire::FileWrite,
    responses((status = 200, body = wire::Status), (status = 400, body = wire::ErrorBody), (status = 404, body = wire::ErrorBody)))]
pub(crate) async fn write(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Json(request): Json<wire::FileWrite>,
) -> Result<axum::Json<wire::Status>, ApiError> {
    let id = Manager::parse_id(&id)?;
    if request.path.is_empty() {
        return Err(ApiError::bad_request("path is required"));
    }
    let mode = if request.mode.is_empty() {
        0o644
    } else {
        parse_mode("mode", &request.mode)?
    };
    let size = request.content.len();
    state
        .manager()
        .backend()
        .write_file(&id, &request.path, request.content.into_bytes(), Some(mode))
        .await?;
    state.manager().events().publish(
        "file.written",
        Some(id.as_str()),
        Some(serde_json::json!({"path": request.path, "size": size})),
    );
    Ok(axum::Json(wire::Status::new("written")))
}

/// Upload a file's raw bytes (a Forge addition: binary-safe, unlike the JSON write).
#[utoipa::path(put, path = "/sandboxes/{id}/files", tag = "files", params(("id" = String, Path), ("path" = String, Query), ("mode" = Option<String>, Query)),
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses((status = 200, body = wire::Status), (status = 413, body = wire::ErrorBody)))]
pub(crate) async fn upload(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<PathQuery>,
    RawBody(body): RawBody,
) -> Result<axum::Json<wire::Status>, ApiError> {
    let id = Manager::parse_id(&id)?;
    let path = required(query.path.as_deref(), "path")?;
    let mode = query
        .mode
        .as_deref()
        .map(|m| parse_mode("mode", m))
        .transpose()?;
    let size = body.len();
    state
        .manager()
        .backend()
        .write_file(&id, path, body.to_vec(), mode.or(Some(0o644)))
        .await?;
    state.manager().events().publish(
        "file.written",
        Some(id.as_str()),
        Some(serde_json::json!({"path": path, "size": size})),
    );
    Ok(axum::Json(wire::Status::new("written")))
}

/// Read a file's raw bytes.
#[utoipa::path(get, path = "/sandboxes/{id}/files", tag = "files", params(("id" = String, Path), ("path" = String, Query)),
    responses((status = 200, content_type = "application/octet-stream", body = Vec<u8>), (status = 400, body = wire::ErrorBody), (status = 404, body = wire::ErrorBody)))]
pub(crate) async fn read(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<PathQuery>,
) -> Result<Response, ApiError> {
    let id = Manager::parse_id(&id)?;
    let path = required(query.path.as_deref(), "path")?;
    let data = state.manager().backend().read_file(&id, path).await?;
    state.manager().events().publish(
        "file.read",
        Some(id.as_str()),
        Some(serde_json::json!({"path": path, "size": data.len()})),
    );
    let mut response = data.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    Ok(response)
}

/// Delete a file, or a directory with `recursive=true`.
#[utoipa::path(delete, path = "/sandboxes/{id}/files", tag = "files", params(("id" = String, Path), ("path" = String, Query), ("recursive" = Option<bool>, Query)),
    responses((status = 200, body = wire::Status), (status = 400, body = wire::ErrorBody)))]
pub(crate) async fn delete(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<PathQuery>,
) -> Result<axum::Json<wire::Status>, ApiError> {
    let id = Manager::parse_id(&id)?;
    let path = required(query.path.as_deref(), "path")?;
    let recursive = query.recursive.as_deref() == Some("true");
    state
        .manager()
        .backend()
        .remove(&id, path, recursive)
        .await?;
    Ok(axum::Json(wire::Status::new("deleted")))
}

/// List a directory (`/` by default).
#[utoipa::path(get, path = "/sandboxes/{id}/files/list", tag = "files", params(("id" = String, Path), ("path" = Option<String>, Query)),
    responses((status = 200, body = [wire::FileInfo])))]
pub(crate) async fn list(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<PathQuery>,
) -> Result<axum::Json<Vec<wire::FileInfo>>, ApiError> {
    let id = Manager::parse_id(&id)?;
    let path = query
        .path
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "/".to_owned());
    let files = state.manager().backend().list_dir(&id, &path).await?;
    Ok(axum::Json(files.iter().map(info_to_wire).collect()))
}

/// Move a file or directory (the new parent is created).
#[utoipa::path(post, path = "/sandboxes/{id}/files/move", tag = "files", params(("id" = String, Path)), request_body = wire::FileMove,
    responses((status = 200, body = wire::Status)))]
pub(crate) async fn rename(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Json(request): Json<wire::FileMove>,
) -> Result<axum::Json<wire::Status>, ApiError> {
    let id = Manager::parse_id(&id)?;
    if request.old_path.is_empty() || request.new_path.is_empty() {
        return Err(ApiError::bad_request("old_path and new_path are required"));
    }
    state
        .manager()
        .backend()
        .rename(&id, &request.old_path, &request.new_path)
        .await?;
    Ok(axum::Json(wire::Status::new("moved")))
}

/// Change permission bits.
#[utoipa::path(post, path = "/sandboxes/{id}/files/chmod", tag = "files", params(("id" = String, Path)), request_body = wire::FileChmod,
    responses((status = 200, body = wire::Status), (status = 400, body = wire::ErrorBody)))]
pub(crate) async fn chmod(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Json(request): Json<wire::FileChmod>,
) -> Result<axum::Json<wire::Status>, ApiError> {
    let id = Manager::parse_id(&id)?;
    if request.path.is_empty() {
        return Err(ApiError::bad_request("path is required"));
    }
    let mode = parse_mode("mode", &request.mode)?;
    state
        .manager()
        .backend()
        .chmod(&id, &request.path, mode)
        .await?;
    Ok(axum::Json(wire::Status::new("chmod applied")))
}

/// A file's metadata.
#[utoipa::path(get, path = "/sandboxes/{id}/files/stat", tag = "files", params(("id" = String, Path), ("path" = String, Query)),
    responses((status = 200, body = wire::FileInfo), (status = 400, body = wire::ErrorBody)))]
pub(crate) async fn stat(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<PathQuery>,
) -> Result<axum::Json<wire::FileInfo>, ApiError> {
    let id = Manager::parse_id(&id)?;
    let path = required(query.path.as_deref(), "path")?;
    let info = state.manager().backend().stat(&id, path).await?;
    Ok(axum::Json(info_to_wire(&info)))
}

#[derive(Debug, Deserialize)]
pub(crate) struct GlobQuery {
    pattern: Option<String>,
}

/// Paths matching a pattern (`*`, `?`, `[...]`, `**`).
#[utoipa::path(get, path = "/sandboxes/{id}/files/glob", tag = "files", params(("id" = String, Path), ("pattern" = String, Query)),
    responses((status = 200, body = [String]), (status = 400, body = wire::ErrorBody)))]
pub(crate) async fn glob(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<GlobQuery>,
) -> Result<axum::Json<Vec<String>>, ApiError> {
    let id = Manager::parse_id(&id)?;
    let pattern = required(query.pattern.as_deref(), "pattern")?;
    Ok(axum::Json(
        state.manager().backend().glob(&id, pattern).await?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn modes_print_like_go() {
        let info = |kind, mode| FileInfo {
            path: "/x".into(),
            name: "x".into(),
            kind,
            size: 0,
            mode,
            modified_ms: 0,
            link_target: None,
        };
        let modes: Vec<String> = [
            info(FileKind::File, 0o644),
            info(FileKind::Dir, 0o755),
            info(FileKind::Symlink, 0o777),
        ]
        .iter()
        .map(|i| info_to_wire(i).mode)
        .collect();
        assert_eq!(modes, ["644", "20000000755", "1000000777"]);
        assert_eq!(parse_mode("mode", "0755").unwrap(), 0o755);
        assert_eq!(
            parse_mode("mode", "rwx").unwrap_err().message,
            "invalid mode: \"rwx\" is not an octal mode such as 0644"
        );
    }
}
