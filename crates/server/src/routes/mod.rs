//! The router: every route, its middleware, and the OpenAPI document built from the
//! handlers' annotations.

mod docs;
mod events;
mod exec;
mod files;
mod gateway;
mod images;
mod network;
mod processes;
mod sandboxes;
mod system;
mod templates;

use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderName, Method, Uri};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Router, middleware as mw};
use tower_http::cors::{Any, CorsLayer};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::error::{ApiError, Code};
use crate::middleware;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Forge",
        description = "Sandboxes for AI agents. The sandbox, template, provider, pool, health and event routes are wire-compatible with ForgeVM's API; processes and terminals are Forge's additions. Authenticate with `X-API-Key` when the server has a key."
    ),
    tags(
        (name = "sandboxes", description = "Create, inspect, extend and destroy sandboxes"),
        (name = "exec", description = "Run commands: to completion, streamed as NDJSON, or over a WebSocket"),
        (name = "files", description = "Files inside a sandbox"),
        (name = "processes", description = "Background processes and terminals"),
        (name = "templates", description = "Sandbox templates and their warm pools"),
        (name = "images", description = "The image store: pull, import, build, remove, prune"),
        (name = "system", description = "Health, metrics, providers, pool, snapshots, events"),
        (name = "gateway", description = "Tool-gateway sessions, typed tools under an enforced policy, and the ledger")
    )
)]
struct ApiDoc;

pub(crate) fn router(state: AppState) -> Router {
    let routes = OpenApiRouter::new()
        .routes(routes!(
            sandboxes::create,
            sandboxes::list,
            sandboxes::prune
        ))
        .routes(routes!(sandboxes::get, sandboxes::destroy))
        .routes(routes!(sandboxes::extend))
        .routes(routes!(sandboxes::logs))
        .routes(routes!(sandboxes::snapshot))
        .routes(routes!(sandboxes::fork))
        .routes(routes!(network::connections))
        .routes(routes!(network::expose_port, network::list_ports))
        .routes(routes!(network::remove_port))
        .routes(routes!(images::list))
        .routes(routes!(images::pull))
        .routes(routes!(images::import))
        .routes(routes!(images::build))
        .routes(routes!(images::prune))
        .routes(routes!(images::get, images::remove))
        .routes(routes!(exec::exec))
        .routes(routes!(exec::exec_ws))
        .routes(routes!(
            files::write,
            files::read,
            files::delete,
            files::upload
        ))
        .routes(routes!(files::list))
        .routes(routes!(files::rename))
        .routes(routes!(files::chmod))
        .routes(routes!(files::stat))
        .routes(routes!(files::glob))
        .routes(routes!(processes::start, processes::list))
        .routes(routes!(processes::get, processes::kill))
        .routes(routes!(processes::logs))
        .routes(routes!(processes::stdin))
        .routes(routes!(processes::signal))
        .routes(routes!(processes::wait))
        .routes(routes!(processes::resize))
        .routes(routes!(processes::terminal))
        .routes(routes!(templates::create, templates::list))
        .routes(routes!(
            templates::get,
            templates::update,
            templates::delete
        ))
        .routes(routes!(templates::spawn))
        .routes(routes!(system::providers))
        .routes(routes!(system::provider))
        .routes(routes!(system::test_providers))
        .routes(routes!(system::snapshots))
        .routes(routes!(system::pool_status))
        .routes(routes!(system::health))
        .routes(routes!(system::metrics_json))
        .routes(routes!(events::events))
        .routes(routes!(gateway::create))
        .routes(routes!(gateway::get, gateway::close))
        .routes(routes!(gateway::reset))
        .routes(routes!(gateway::artifacts))
        .routes(routes!(gateway::tools))
        .routes(routes!(gateway::call))
        .routes(routes!(gateway::ledger));
    let (api, mut spec) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .nest("/api/v1", routes)
        .split_for_parts();
    unique_operation_ids(&mut spec);
    let spec_json = spec.to_pretty_json().unwrap_or_else(|_| "{}".to_owned());

    // ForgeVM's router answers collection routes with and without a trailing slash.
    let trailing = Router::new()
        .route(
            "/sandboxes/",
            get(sandboxes::list)
                .post(sandboxes::create)
                .delete(sandboxes::prune),
        )
        .route("/templates/", get(templates::list).post(templates::create));
    let mut authenticated = api
        .nest("/api/v1", trailing)
        .route("/metrics", get(system::prometheus));
    if let Some(mcp) = state.mcp() {
        authenticated = authenticated.route_service("/mcp", mcp.router());
    }
    let authenticated = authenticated.layer(mw::from_fn_with_state(
        state.clone(),
        middleware::authenticate,
    ));
    let open = Router::new()
        .route(
            "/api/v1/openapi.json",
            get(move || async move { ([("content-type", "application/json")], spec_json) }),
        )
        .merge(docs::router());
    let cors = CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([
            Method::GET,
            Method::POST,
            Method::PUT,
            Method::DELETE,
            Method::OPTIONS,
        ])
        .allow_headers([
            HeaderName::from_static("content-type"),
            HeaderName::from_static("x-api-key"),
            HeaderName::from_static("x-request-id"),
            HeaderName::from_static("x-user-id"),
            HeaderName::from_static("authorization"),
            HeaderName::from_static("last-event-id"),
            // MCP Streamable HTTP, for browser-based MCP clients.
            HeaderName::from_static("mcp-session-id"),
            HeaderName::from_static("mcp-protocol-version"),
            HeaderName::from_static(forge_mcp::ATTACH_HEADER),
        ])
        .expose_headers([
            HeaderName::from_static("x-request-id"),
            HeaderName::from_static("mcp-session-id"),
        ]);
    let max_body = state.config().max_body_bytes;
    authenticated
        .merge(open)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(max_body))
        .layer(mw::from_fn_with_state(state.clone(), middleware::count))
        .layer(cors)
        .layer(mw::from_fn(middleware::request_id))
        .with_state(state)
}

/// Handlers in different modules share names (`list`, `get`); operation ids must be unique,
/// so each is prefixed with its tag (`sandboxes_list`, `templates_list`). Axum's catch-all
/// segments (`{*name}`) are plain parameters in OpenAPI.
fn unique_operation_ids(spec: &mut utoipa::openapi::OpenApi) {
    let paths = std::mem::take(&mut spec.paths.paths);
    spec.paths.paths = paths
        .into_iter()
        .map(|(path, item)| (path.replace("{*", "{"), item))
        .collect();
    for item in spec.paths.paths.values_mut() {
        for operation in [
            &mut item.get,
            &mut item.post,
            &mut item.put,
            &mut item.delete,
        ]
        .into_iter()
        .flatten()
        {
            let tag = operation
                .tags
                .as_ref()
                .and_then(|t| t.first())
                .cloned()
                .unwrap_or_default();
            if let Some(id) = &operation.operation_id
                && !tag.is_empty()
            {
                operation.operation_id = Some(format!("{tag}_{id}"));
            }
        }
    }
}

async fn not_found(method: Method, uri: Uri) -> impl IntoResponse {
    ApiError::not_found(format!("no route for {method} {}", uri.path()))
}

async fn method_not_allowed(method: Method, uri: Uri) -> impl IntoResponse {
    ApiError::new(
        Code::MethodNotAllowed,
        format!("{method} is not allowed on {}", uri.path()),
    )
}
