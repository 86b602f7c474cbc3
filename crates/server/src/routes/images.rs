//! `/images…`: the image store over HTTP (a Forge addition): list, inspect, pull, import,
//! build, remove and prune. Pulls and builds can stream their progress as JSON lines.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use forge_image::{DebianBuild, ImageStore, ProgressEvent};
use futures::StreamExt as _;
use serde::Deserialize;
use tokio::io::AsyncWriteExt as _;

use crate::AppState;
use crate::error::{ApiError, Code};
use crate::extract::Json;
use crate::wire;

/// The backend's image store, or a clear refusal for a backend without one.
pub(crate) fn store(state: &AppState) -> Result<Arc<ImageStore>, ApiError> {
    state.manager().backend().images().ok_or_else(|| {
        ApiError::bad_request(format!(
            "the {} backend has no image store",
            state.manager().backend().name()
        ))
    })
}

/// Runs blocking store work off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, forge_image::ImageError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::internal("use the image store", &e))?
        .map_err(ApiError::from)
}

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(default)]
pub(crate) struct StreamQuery {
    /// Answer with progress as JSON lines, ending with a `done` or `error` line.
    stream: bool,
}

/// List images, the host base first.
#[utoipa::path(get, path = "/images", tag = "images", responses((status = 200, body = [wire::Image])))]
pub(crate) async fn list(
    State(state): State<AppState>,
) -> Result<axum::Json<Vec<wire::Image>>, ApiError> {
    let store = store(&state)?;
    let images = blocking(move || store.list()).await?;
    Ok(axum::Json(
        images.into_iter().map(|i| i.info().into()).collect(),
    ))
}

/// One image, by any of its names or an id prefix (slashes in the name as they are).
#[utoipa::path(get, path = "/images/{*name}", tag = "images", params(("name" = String, Path)),
    responses((status = 200, body = wire::Image), (status = 404, body = wire::ErrorBody)))]
pub(crate) async fn get(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<axum::Json<wire::Image>, ApiError> {
    let store = store(&state)?;
    let image = blocking(move || store.get(&name)).await?;
    Ok(axum::Json(image.info().into()))
}

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(default)]
pub(crate) struct RemoveQuery {
    /// Remove it even while sandboxes or templates use it (their layers stay until they go).
    force: bool,
}

/// Remove an image; layers nothing else uses are deleted.
#[utoipa::path(delete, path = "/images/{*name}", tag = "images", params(("name" = String, Path), RemoveQuery),
    responses((status = 200, body = wire::ImagesPruned), (status = 404, body = wire::ErrorBody), (status = 409, description = "in use", body = wire::ErrorBody)))]
pub(crate) async fn remove(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(query): Query<RemoveQuery>,
) -> Result<axum::Json<wire::ImagesPruned>, ApiError> {
    let store = store(&state)?;
    let report = blocking(move || store.remove(&name, query.force)).await?;
    state.manager().events().publish(
        "image.removed",
        None,
        Some(serde_json::json!({"images": report.images, "layers": report.layers})),
    );
    Ok(axum::Json(report.into()))
}

/// Delete what nothing uses: forks' leftover images, unreferenced layers and blobs.
#[utoipa::path(post, path = "/images/prune", tag = "images", responses((status = 200, body = wire::ImagesPruned)))]
pub(crate) async fn prune(
    State(state): State<AppState>,
) -> Result<axum::Json<wire::ImagesPruned>, ApiError> {
    let store = store(&state)?;
    let report = blocking(move || store.prune()).await?;
    Ok(axum::Json(report.into()))
}

/// Pull an image from its registry (or a configured mirror).
#[utoipa::path(post, path = "/images/pull", tag = "images", request_body = wire::PullRequest, params(StreamQuery),
    responses((status = 200, body = wire::Image), (status = 400, body = wire::ErrorBody), (status = 503, description = "the registry cannot be reached", body = wire::ErrorBody)))]
pub(crate) async fn pull(
    State(state): State<AppState>,
    Query(query): Query<StreamQuery>,
    Json(request): Json<wire::PullRequest>,
) -> Result<Response, ApiError> {
    let store = store(&state)?;
    forge_image::reference::normalize(&request.reference).map_err(ApiError::from)?;
    let events = state.clone();
    let work = move |progress: Progress| async move {
        let image = store.pull(&request.reference, &progress).await?;
        events.manager().events().publish(
            "image.pulled",
            None,
            Some(serde_json::json!({"image": image.name(), "digest": image.digest})),
        );
        Ok(image)
    };
    respond(query.stream, work).await
}

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(default)]
pub(crate) struct ImportQuery {
    /// Name for the imported image (required when the archive names none).
    name: Option<String>,
}

/// Import a `docker save` / `podman save` archive or an OCI layout tar, sent as the body.
#[utoipa::path(post, path = "/images/import", tag = "images", params(ImportQuery),
    request_body(content = Vec<u8>, content_type = "application/x-tar"),
    responses((status = 200, body = [wire::Image]), (status = 400, body = wire::ErrorBody), (status = 413, body = wire::ErrorBody)))]
pub(crate) async fn import(
    State(state): State<AppState>,
    Query(query): Query<ImportQuery>,
    body: Body,
) -> Result<axum::Json<Vec<wire::Image>>, ApiError> {
    let store = store(&state)?;
    if let Some(name) = &query.name {
        forge_image::reference::normalize(name).map_err(ApiError::from)?;
    }
    let limit = state.config().max_image_bytes;
    let upload = store.temp_dir().map_err(ApiError::from)?;
    let path = upload.path().join("upload.tar");
    let mut file = tokio::fs::File::create(&path)
        .await
        .map_err(|e| ApiError::internal("store the upload", &e))?;
    let mut stream = body.into_data_stream();
    let mut received: u64 = 0;
    while let Some(chunk) = stream.next().await {
        let chunk: Bytes =
            chunk.map_err(|e| ApiError::bad_request(format!("the upload failed: {e}")))?;
        received += chunk.len() as u64;
        if received > limit {
            return Err(ApiError::new(
                Code::TooLarge,
                format!(
                    "the archive is larger than the server's limit of {limit} bytes (images.max_upload_bytes)"
                ),
            ));
        }
        file.write_all(&chunk)
            .await
            .map_err(|e| ApiError::internal("store the upload", &e))?;
    }
    file.flush()
        .await
        .map_err(|e| ApiError::internal("store the upload", &e))?;
    drop(file);
    if received == 0 {
        return Err(ApiError::bad_request(
            "the body is empty: send the archive's bytes",
        ));
    }
    let images = blocking(move || {
        let result = store.import(&path, query.name.as_deref(), &forge_image::NoProgress);
        drop(upload);
        result
    })
    .await?;
    let names: Vec<String> = images.iter().map(forge_image::Image::name).collect();
    state.manager().events().publish(
        "image.imported",
        None,
        Some(serde_json::json!({"images": names})),
    );
    Ok(axum::Json(
        images.into_iter().map(|i| i.info().into()).collect(),
    ))
}

/// Build a Debian image with `mmdebstrap` from the host's Debian mirror.
#[utoipa::path(post, path = "/images/build", tag = "images", request_body = wire::BuildRequest, params(StreamQuery),
    responses((status = 200, body = wire::Image), (status = 400, body = wire::ErrorBody)))]
pub(crate) async fn build(
    State(state): State<AppState>,
    Query(query): Query<StreamQuery>,
    Json(request): Json<wire::BuildRequest>,
) -> Result<Response, ApiError> {
    let store = store(&state)?;
    if request.name.is_empty() {
        return Err(ApiError::field("name", "is required"));
    }
    let build = DebianBuild {
        name: request.name,
        suite: Some(request.suite)
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "bookworm".into()),
        packages: request.packages,
        variant: Some(request.variant)
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| "apt".into()),
        mirror: Some(request.mirror).filter(|m| !m.is_empty()),
    };
    let events = state.clone();
    let work = move |progress: Progress| async move {
        let image = tokio::task::spawn_blocking(move || store.build_debian(&build, &progress))
            .await
            .map_err(|e| forge_image::ImageError::Build {
                reason: format!("the build stopped: {e}"),
            })??;
        events.manager().events().publish(
            "image.built",
            None,
            Some(serde_json::json!({"image": image.name()})),
        );
        Ok(image)
    };
    respond(query.stream, work).await
}

/// Progress that goes to a channel when the client asked for a stream.
#[derive(Clone)]
pub(crate) struct Progress(Option<tokio::sync::mpsc::UnboundedSender<ProgressEvent>>);

impl forge_image::Progress for Progress {
    fn event(&self, event: ProgressEvent) {
        if let Some(sender) = &self.0 {
            let _ = sender.send(event);
        }
    }
}

/// Runs `work`: answers its image as JSON, or (with `stream`) its progress as JSON lines
/// followed by `{"event":"done","image":…}` or `{"event":"error",…}`.
async fn respond<F, Fut>(stream: bool, work: F) -> Result<Response, ApiError>
where
    F: FnOnce(Progress) -> Fut,
    Fut: std::future::Future<Output = Result<forge_image::Image, forge_image::ImageError>>
        + Send
        + 'static,
{
    if !stream {
        let image = work(Progress(None)).await?;
        return Ok(axum::Json(wire::Image::from(image.info())).into_response());
    }
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
    let task = tokio::spawn(work(Progress(Some(sender))));
    let progress = tokio_stream::wrappers::UnboundedReceiverStream::new(receiver)
        .map(|event| line(&serde_json::to_value(event).unwrap_or_default()));
    let end = futures::stream::once(async move {
        let last = match task.await {
            Ok(Ok(image)) => {
                serde_json::json!({"event": "done", "image": wire::Image::from(image.info())})
            }
            Ok(Err(err)) => {
                let api = ApiError::from(err);
                serde_json::json!({"event": "error", "code": api.code.as_str(), "message": api.message})
            }
            Err(err) => {
                serde_json::json!({"event": "error", "code": "INTERNAL_ERROR", "message": err.to_string()})
            }
        };
        line(&last)
    });
    let body = Body::from_stream(progress.chain(end).map(Ok::<_, Infallible>));
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        body,
    )
        .into_response())
}

fn line(value: &serde_json::Value) -> Bytes {
    let mut bytes = serde_json::to_vec(value).unwrap_or_default();
    bytes.push(b'\n');
    Bytes::from(bytes)
}
