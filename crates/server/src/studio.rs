//! weft Studio: the browser app served at `/studio`, embedded in the binary (plain ES modules, no build
//! step, nothing fetched from elsewhere). It is a client of the public HTTP API only; see `docs/studio.md`.
//!
//! The pages carry no data, so they are served without authentication: the app asks for an API key when
//! the server wants one and sends it with its API calls.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use axum::routing::get;

use crate::error::ApiError;

/// One embedded file: its path under `/studio/`, its media type and its bytes.
struct Asset {
    path: &'static str,
    media_type: &'static str,
    body: &'static [u8],
}

const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const SVG: &str = "image/svg+xml";

macro_rules! asset {
    ($path:literal, $media_type:expr) => {
        Asset { path: $path, media_type: $media_type, body: include_bytes!(concat!("../studio/", $path)) }
    };
}

/// Every file of the app.
const ASSETS: &[Asset] = &[
    asset!("index.html", HTML),
    asset!("studio.css", CSS),
    asset!("icon.svg", SVG),
    asset!("js/api.js", JS),
    asset!("js/app.js", JS),
    asset!("js/chat.js", JS),
    asset!("js/dom.js", JS),
    asset!("js/graph.js", JS),
    asset!("js/history.js", JS),
    asset!("js/interrupts.js", JS),
    asset!("js/run.js", JS),
    asset!("js/threads.js", JS),
    asset!("js/tree.js", JS),
];

/// Where the app may load from and talk to: this server only.
const CSP: &str = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; \
                   connect-src 'self'; object-src 'none'; base-uri 'self'; frame-ancestors 'self'";

/// The asset at `path`, if there is one.
fn find(path: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|asset| asset.path == path)
}

fn serve(path: &str) -> Response {
    let Some(asset) = find(path) else { return ApiError::not_found("Not Found").into_response() };
    let mut response = asset.body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.media_type));
    // The binary may change under the same URLs: the browser asks again each time (the files are small).
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    response
}

/// `GET /studio`: to `/studio/`, so that the app's relative URLs resolve under it.
async fn redirect() -> Response {
    let mut response = StatusCode::PERMANENT_REDIRECT.into_response();
    response.headers_mut().insert(header::LOCATION, HeaderValue::from_static("/studio/"));
    response
}

async fn index() -> Response {
    serve("index.html")
}

async fn file(Path(path): Path<String>) -> Response {
    serve(&path)
}

/// The studio's routes: `/studio`, `/studio/` and its files under `/studio/`.
pub(crate) fn router() -> Router {
    Router::new()
        .route("/studio", get(redirect))
        .route("/studio/", get(index))
        .route("/studio/{*path}", get(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_the_app_imports_is_embedded() {
        for asset in ASSETS.iter().filter(|a| a.media_type == JS || a.media_type == HTML) {
            let text = std::str::from_utf8(asset.body).unwrap();
            for line in text.lines().filter(|l| l.trim_start().starts_with("import ")) {
                let Some(from) = line.split(['"', '\'']).nth(1) else { continue };
                let dir = asset.path.rsplit_once('/').map_or("", |(d, _)| d);
                let target = from.strip_prefix("./").map_or(from.to_owned(), |rest| {
                    if dir.is_empty() { rest.to_owned() } else { format!("{dir}/{rest}") }
                });
                assert!(find(&target).is_some(), "{} imports {from}, which is not embedded", asset.path);
            }
        }
    }

    #[test]
    fn index_refers_to_embedded_files_only() {
        let index = std::str::from_utf8(find("index.html").unwrap().body).unwrap();
        for attr in ["src=\"", "href=\""] {
            for part in index.split(attr).skip(1) {
                let url = part.split('"').next().unwrap();
                if url.starts_with('#') {
                    continue;
                }
                assert!(!url.contains("//"), "index.html loads {url} from elsewhere");
                assert!(find(url.trim_start_matches("./")).is_some(), "index.html refers to {url}");
            }
        }
    }
}
