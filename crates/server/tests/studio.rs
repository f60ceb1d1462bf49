//! The studio's files at `/studio`: served from the binary, with their media types and a policy that keeps
//! the page on this server, without authentication (the app's API calls authenticate), and nothing else.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use common::{builder, get, send, start};

#[tokio::test]
async fn studio_redirects_to_its_folder_and_serves_the_page() {
    let server = start(builder()).await;
    let bare = get(server.addr, "/studio").await;
    assert_eq!(bare.status, 308);
    assert_eq!(bare.header("location"), Some("/studio/"));

    let page = get(server.addr, "/studio/").await;
    assert_eq!(page.status, 200);
    assert_eq!(page.header("content-type"), Some("text/html; charset=utf-8"));
    assert!(page.body.contains("<title>weft Studio</title>"), "{}", page.body);
    let policy = page.header("content-security-policy").unwrap();
    assert!(policy.contains("default-src 'self'") && policy.contains("connect-src 'self'"), "{policy}");
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
}

#[tokio::test]
async fn every_file_the_page_loads_is_served_with_its_media_type() {
    let server = start(builder()).await;
    for (path, media_type, sample) in [
        ("/studio/studio.css", "text/css; charset=utf-8", ":root"),
        ("/studio/icon.svg", "image/svg+xml", "<svg"),
        ("/studio/js/app.js", "text/javascript; charset=utf-8", "import"),
        ("/studio/js/api.js", "text/javascript; charset=utf-8", "x-api-key"),
        ("/studio/js/graph.js", "text/javascript; charset=utf-8", "export class GraphView"),
    ] {
        let reply = get(server.addr, path).await;
        assert_eq!(reply.status, 200, "{path}");
        assert_eq!(reply.header("content-type"), Some(media_type), "{path}");
        assert!(reply.body.contains(sample), "{path}");
    }
}

#[tokio::test]
async fn unknown_files_and_paths_out_of_the_folder_are_404() {
    let server = start(builder()).await;
    for path in [
        "/studio/nope.js",
        "/studio/js/",
        "/studio/../Cargo.toml",
        "/studio/js/../../src/lib.rs",
        "/studio/%2e%2e/x",
    ] {
        let reply = get(server.addr, path).await;
        assert_eq!(reply.status, 404, "{path}: {}", reply.body);
        assert_eq!(reply.detail(), "Not Found", "{path}");
    }
    let post = send(server.addr, "POST", "/studio/", Some(b"{}"), &[]).await;
    assert_eq!(post.status, 405);
}

#[tokio::test]
async fn the_page_needs_no_key_but_the_api_still_does() {
    let server = start(builder().api_keys([("key-alice", "alice")])).await;
    assert_eq!(get(server.addr, "/studio/").await.status, 200);
    assert_eq!(get(server.addr, "/studio/js/app.js").await.status, 200);
    let api = send(server.addr, "POST", "/assistants/search", Some(b"{}"), &[]).await;
    assert_eq!(api.status, 401);
    let keyed =
        send(server.addr, "POST", "/assistants/search", Some(b"{}"), &[("x-api-key", "key-alice")]).await;
    assert_eq!(keyed.status, 200);
}
