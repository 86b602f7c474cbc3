//! The offline API docs page: Swagger UI from the `swagger-ui-dist` npm package, embedded
//! in the binary, rendering `/api/v1/openapi.json`. No CDN.

use axum::Router;
use axum::http::header;
use axum::response::{IntoResponse, Redirect};
use axum::routing::get;

use crate::AppState;

const PAGE: &str = include_str!("../../assets/docs.html");
const BUNDLE: &str = include_str!("../../assets/swagger-ui/swagger-ui-bundle.js");
const CSS: &str = include_str!("../../assets/swagger-ui/swagger-ui.css");
const FAVICON: &[u8] = include_bytes!("../../assets/swagger-ui/favicon-32x32.png");

pub(crate) fn router() -> Router<AppState> {
    // The page loads its assets by relative paths, so it is served with a trailing slash.
    Router::new()
        .route(
            "/api/v1/docs",
            get(|| async { Redirect::permanent("/api/v1/docs/") }),
        )
        .route(
            "/api/v1/docs/",
            get(|| async { ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE) }),
        )
        .route(
            "/api/v1/docs/swagger-ui-bundle.js",
            get(|| async { asset("application/javascript", BUNDLE.as_bytes()) }),
        )
        .route(
            "/api/v1/docs/swagger-ui.css",
            get(|| async { asset("text/css", CSS.as_bytes()) }),
        )
        .route(
            "/api/v1/docs/favicon-32x32.png",
            get(|| async { asset("image/png", FAVICON) }),
        )
}

fn asset(content_type: &'static str, body: &'static [u8]) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        body,
    )
}
