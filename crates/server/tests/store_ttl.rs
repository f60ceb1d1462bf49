//! Store TTLs over the API: `ttl` on `PUT /store/items`, `refresh_ttl` on get and search, the server's
//! store TTL settings, and bad input.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};
use weft_server::StoreTtlConfig;

async fn put(addr: SocketAddr, body: Value) -> common::Reply {
    common::send(addr, "PUT", "/store/items", Some(body.to_string().as_bytes()), &[]).await
}

async fn item(addr: SocketAddr, ns: &str, key: &str, refresh: Option<&str>) -> Value {
    let mut path = format!("/store/items?namespace={ns}&key={key}");
    if let Some(refresh) = refresh {
        path.push_str(&format!("&refresh_ttl={refresh}"));
    }
    let reply = common::get(addr, &path).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.json()
}

async fn search(addr: SocketAddr, prefix: &str, refresh: bool) -> usize {
    let body = json!({"namespace_prefix": [prefix], "refresh_ttl": refresh});
    let reply = common::post(addr, "/store/items/search", body).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.json()["items"].as_array().map_or(0, Vec::len)
}

async fn sleep_ms(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

/// 0.03 minute is 1.8 s: the checks sit 0.6 s or more from each expiry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_expire_after_their_ttl_and_reads_refresh_them() {
    let server = common::start(common::builder()).await;
    let addr = server.addr;
    for (ns, ttl) in [("gone", json!(0.03)), ("byget", json!(0.03)), ("bysearch", json!(0.03))] {
        let r = put(addr, json!({"namespace": [ns], "key": "k", "value": {"v": 1}, "ttl": ttl})).await;
        assert_eq!(r.status, 204, "{}", r.body);
    }
    let r = put(addr, json!({"namespace": ["kept"], "key": "k", "value": {"v": 1}, "ttl": null})).await;
    assert_eq!(r.status, 204, "{}", r.body);
    assert!(!item(addr, "gone", "k", Some("false")).await.is_null());

    sleep_ms(1000).await;
    assert!(!item(addr, "byget", "k", Some("true")).await.is_null());
    assert_eq!(search(addr, "bysearch", true).await, 1);

    sleep_ms(1300).await;
    assert!(item(addr, "gone", "k", Some("false")).await.is_null(), "expired after 1.8 s");
    assert_eq!(search(addr, "gone", false).await, 0, "search skips expired items");
    assert!(!item(addr, "byget", "k", Some("false")).await.is_null(), "a get with refresh_ttl restarts it");
    assert_eq!(search(addr, "bysearch", false).await, 1, "a search with refresh_ttl restarts it");
    let listed = common::post(addr, "/store/namespaces", json!({})).await.json();
    assert!(!listed["namespaces"].as_array().unwrap().contains(&json!(["gone"])), "{listed}");

    sleep_ms(1300).await;
    assert!(item(addr, "byget", "k", Some("false")).await.is_null(), "reads without refresh do not extend");
    assert_eq!(search(addr, "bysearch", false).await, 0);
    assert!(!item(addr, "kept", "k", None).await.is_null(), "an item without a TTL stays");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_store_ttl_sets_the_default_and_refresh_on_read() {
    let config = StoreTtlConfig::from_langgraph_json(&json!({"store": {"ttl": {
        "default_ttl": 0.02, "refresh_on_read": false, "sweep_interval_minutes": 0.001
    }}}))
    .unwrap()
    .unwrap();
    let server = common::start(common::builder().store_ttl(config)).await;
    let addr = server.addr;
    let r = put(addr, json!({"namespace": ["d"], "key": "default", "value": {"v": 1}})).await;
    assert_eq!(r.status, 204, "{}", r.body);
    let r = put(addr, json!({"namespace": ["d"], "key": "long", "value": {"v": 1}, "ttl": 10})).await;
    assert_eq!(r.status, 204, "{}", r.body);
    sleep_ms(700).await;
    // Reads without refresh_ttl follow the server's setting: no refresh.
    assert!(!item(addr, "d", "default", None).await.is_null());
    assert_eq!(search(addr, "d", false).await, 2);
    sleep_ms(1000).await;
    assert!(item(addr, "d", "default", None).await.is_null(), "the default TTL of 1.2 s ran out");
    assert!(!item(addr, "d", "long", None).await.is_null(), "an item's own TTL wins");
}

#[tokio::test]
async fn bad_ttl_and_refresh_ttl_are_refused() {
    let server = common::start(common::builder()).await;
    let addr = server.addr;
    let base = json!({"namespace": ["n"], "key": "k", "value": {"v": 1}});
    for (ttl, rule) in [
        (json!("ten"), "\"ten\" is not of type"),
        (json!(true), "true is not of type"),
        (json!([1]), "[1] is not of type"),
        (json!(-1), "invalid ttl -1"),
        (json!(-0.5), "invalid ttl -0.5"),
    ] {
        let mut body = base.clone();
        body["ttl"] = ttl.clone();
        let r = put(addr, body).await;
        assert_eq!(r.status, 422, "ttl {ttl}: {}", r.body);
        assert!(r.detail().contains(rule), "ttl {ttl}: {}", r.detail());
    }
    assert!(item(addr, "n", "k", None).await.is_null(), "nothing was put");
    let r = put(addr, json!({"namespace": ["n"], "key": "k", "value": {"v": 1}, "ttl": 0})).await;
    assert_eq!(r.status, 204, "a zero TTL is allowed: {}", r.body);
    for refresh in [json!("yes"), json!(1), json!({})] {
        let body = json!({"namespace_prefix": ["n"], "refresh_ttl": refresh});
        let r = common::post(addr, "/store/items/search", body).await;
        assert_eq!(r.status, 422, "refresh_ttl {refresh}: {}", r.body);
        assert!(r.detail().contains("is not of type"), "{}", r.detail());
    }
    let r =
        common::post(addr, "/store/items/search", json!({"namespace_prefix": ["n"], "refresh_ttl": null}))
            .await;
    assert_eq!(r.status, 200, "{}", r.body);
}
