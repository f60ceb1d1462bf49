//! `InMemoryStore` beyond the conformance suite: TTL settings on a paused clock, embedding errors,
//! multi-vector items, serialization.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use weft_graph::store::conformance::WordEmbeddings;
use weft_graph::store::{
    InMemoryStore, IndexConfig, PutOptions, SearchOptions, Store, StoreError, Ttl, TtlConfig, namespace,
};
use weft_runnable_core::Embeddings;
use weft_runnable_core::fakes::FakeEmbeddings;

fn ns() -> Vec<String> {
    namespace(["users", "1"])
}

#[tokio::test(start_paused = true)]
async fn default_ttl_applies_to_items_put_without_one() {
    let ttl = TtlConfig { default_ttl: Some(Duration::from_secs(60)), refresh_on_read: true };
    let store = InMemoryStore::new().with_ttl(ttl);
    store.put(&ns(), "default", json!({})).await.unwrap();
    let never = PutOptions { ttl: Ttl::Never, ..PutOptions::default() };
    store.put_with(&ns(), "never", json!({}), never).await.unwrap();
    tokio::time::advance(Duration::from_secs(61)).await;
    assert!(store.get(&ns(), "default").await.unwrap().is_none());
    assert!(store.get(&ns(), "never").await.unwrap().is_some());
}

#[tokio::test(start_paused = true)]
async fn refresh_on_read_can_be_turned_off_per_store_and_per_call() {
    let ttl = TtlConfig { default_ttl: Some(Duration::from_secs(60)), refresh_on_read: false };
    let store = InMemoryStore::new().with_ttl(ttl);
    store.put(&ns(), "plain", json!({})).await.unwrap();
    store.put(&ns(), "refreshed", json!({})).await.unwrap();
    tokio::time::advance(Duration::from_secs(40)).await;
    assert!(store.get(&ns(), "plain").await.unwrap().is_some());
    assert!(store.get_with(&ns(), "refreshed", Some(true)).await.unwrap().is_some());
    tokio::time::advance(Duration::from_secs(40)).await;
    assert!(store.get(&ns(), "plain").await.unwrap().is_none(), "the store's setting says no refresh");
    assert!(store.get(&ns(), "refreshed").await.unwrap().is_some(), "the call asked for a refresh");
}

#[tokio::test(start_paused = true)]
async fn sweep_expired_drops_expired_items() {
    let store = InMemoryStore::new();
    let short = PutOptions { ttl: Ttl::After(Duration::from_secs(1)), ..PutOptions::default() };
    store.put_with(&ns(), "a", json!({}), short.clone()).await.unwrap();
    store.put_with(&ns(), "b", json!({}), short).await.unwrap();
    store.put(&ns(), "c", json!({})).await.unwrap();
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(store.sweep_expired().unwrap(), 2);
    assert_eq!(store.sweep_expired().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_ttl_sweeper_sweeps_at_its_interval_until_stopped() {
    let store = Arc::new(InMemoryStore::new());
    let short = PutOptions { ttl: Ttl::After(Duration::from_secs(1)), ..PutOptions::default() };
    store.put_with(&ns(), "a", json!({}), short.clone()).await.unwrap();
    let sweeper = weft_graph::store::spawn_ttl_sweeper(store.clone(), Duration::from_secs(5));
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Expired, not yet swept: the first sweep is due at 5 s.
    assert_eq!(store.sweep_ttl().await.unwrap(), 1);
    store.put_with(&ns(), "b", json!({}), short.clone()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(store.sweep_ttl().await.unwrap(), 0, "the sweeper took it at 5 s");
    sweeper.stop();
    store.put_with(&ns(), "c", json!({}), short).await.unwrap();
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(store.sweep_ttl().await.unwrap(), 1, "a stopped sweeper sweeps no more");
}

#[test]
fn ttl_minutes_are_checked() {
    assert_eq!(Ttl::try_minutes(1.5).unwrap(), Ttl::After(Duration::from_secs(90)));
    assert_eq!(Ttl::try_minutes(0.0).unwrap(), Ttl::After(Duration::ZERO));
    for bad in [-1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, f64::MAX] {
        let err = Ttl::try_minutes(bad).unwrap_err();
        assert!(matches!(err, StoreError::InvalidTtl(_)), "{bad}: {err}");
    }
    assert_eq!(Ttl::minutes(-1.0), Ttl::After(Duration::ZERO));
}

#[tokio::test(start_paused = true)]
async fn an_expired_item_put_again_gets_a_new_created_at() {
    let store = InMemoryStore::new();
    let short = PutOptions { ttl: Ttl::After(Duration::from_secs(1)), ..PutOptions::default() };
    store.put_with(&ns(), "a", json!({}), short).await.unwrap();
    let first = store.get(&ns(), "a").await.unwrap().unwrap();
    tokio::time::advance(Duration::from_secs(2)).await;
    std::thread::sleep(Duration::from_millis(2));
    store.put(&ns(), "a", json!({"v": 2})).await.unwrap();
    let second = store.get(&ns(), "a").await.unwrap().unwrap();
    assert!(second.created_at > first.created_at);
}

#[test]
fn ttl_minutes_converts_langgraph_units() {
    assert_eq!(Ttl::minutes(1.5), Ttl::After(Duration::from_secs(90)));
    assert_eq!(Ttl::minutes(-1.0), Ttl::After(Duration::ZERO));
    assert_eq!(Ttl::minutes(f64::NAN), Ttl::After(Duration::ZERO));
}

/// Embeddings that misbehave on purpose.
#[derive(Debug)]
enum BadEmbeddings {
    WrongSize,
    WrongCount,
    Fails,
}

#[async_trait]
impl Embeddings for BadEmbeddings {
    async fn embed_documents(&self, texts: Vec<String>) -> weft_runnable_core::Result<Vec<Vec<f32>>> {
        match self {
            Self::WrongSize => Ok(texts.iter().map(|_| vec![1.0; 3]).collect()),
            Self::WrongCount => Ok(vec![vec![1.0; 4]; texts.len() + 1]),
            Self::Fails => Err(weft_runnable_core::Error::msg("model offline")),
        }
    }

    async fn embed_query(&self, _text: &str) -> weft_runnable_core::Result<Vec<f32>> {
        match self {
            Self::WrongSize => Ok(vec![1.0; 3]),
            Self::WrongCount => Ok(vec![1.0; 4]),
            Self::Fails => Err(weft_runnable_core::Error::msg("model offline")),
        }
    }
}

fn store_with(embed: BadEmbeddings) -> InMemoryStore {
    InMemoryStore::new().with_index(IndexConfig::new(4, Arc::new(embed)))
}

#[tokio::test]
async fn vectors_of_the_wrong_size_are_an_error_naming_the_item() {
    let err = store_with(BadEmbeddings::WrongSize).put(&ns(), "doc-7", json!({"t": "x"})).await.unwrap_err();
    assert!(matches!(err, StoreError::Embedding(_)));
    let text = err.to_string();
    assert!(
        text.contains("'doc-7'") && text.contains("3 components") && text.contains("expects 4"),
        "{text}"
    );
}

#[tokio::test]
async fn a_wrong_number_of_vectors_is_an_error() {
    let err = store_with(BadEmbeddings::WrongCount).put(&ns(), "doc", json!({"t": "x"})).await.unwrap_err();
    assert!(err.to_string().contains("1 texts gave 2 vectors"), "{err}");
}

#[tokio::test]
async fn a_failing_model_fails_put_and_search_and_stores_nothing() {
    let store = store_with(BadEmbeddings::Fails);
    let err = store.put(&ns(), "doc", json!({"t": "x"})).await.unwrap_err();
    assert!(err.to_string().contains("model offline"), "{err}");
    assert!(store.get(&ns(), "doc").await.unwrap().is_none());
    let err = store.search(&ns(), SearchOptions::default().query("q")).await.unwrap_err();
    assert!(err.to_string().contains("query 'q'"), "{err}");
}

#[tokio::test]
async fn an_item_with_several_vectors_scores_its_best_one() {
    let index = IndexConfig::new(64, Arc::new(WordEmbeddings { dims: 64 })).with_fields(["tags[*]"]);
    let store = InMemoryStore::new().with_index(index);
    store.put(&ns(), "pets", json!({"tags": ["cat", "dog"]})).await.unwrap();
    store.put(&ns(), "farm", json!({"tags": ["cow"]})).await.unwrap();
    let found = store.search(&ns(), SearchOptions::default().query("dog")).await.unwrap();
    assert_eq!(found[0].item.key, "pets");
    assert!((found[0].score.unwrap() - 1.0).abs() < 1e-6, "{:?}", found[0].score);
}

#[tokio::test]
async fn core_fake_embeddings_find_exact_matches() {
    let store = InMemoryStore::new().with_index(IndexConfig::new(16, Arc::new(FakeEmbeddings::new(16))));
    store.put(&ns(), "a", json!({"x": 1})).await.unwrap();
    store.put(&ns(), "b", json!({"x": 2})).await.unwrap();
    let found = store.search(&ns(), SearchOptions::default().query(r#"{"x":1}"#)).await.unwrap();
    assert_eq!(found[0].item.key, "a");
    assert!((found[0].score.unwrap() - 1.0).abs() < 1e-6);
}

#[tokio::test]
async fn items_serialize_with_rfc3339_times_and_search_items_flatten() {
    let store = InMemoryStore::new();
    store.put(&ns(), "k", json!({"a": 1})).await.unwrap();
    let found = store.search(&ns(), SearchOptions::default()).await.unwrap();
    let json = serde_json::to_value(&found[0]).unwrap();
    assert_eq!(json["namespace"], json!(["users", "1"]));
    assert_eq!(json["key"], json!("k"));
    assert_eq!(json["score"], json!(null));
    let created = json["created_at"].as_str().unwrap();
    assert!(created.ends_with("+00:00") && created.len() == 32, "{created}");
    let back: weft_graph::store::SearchItem = serde_json::from_value(json).unwrap();
    let micros = |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).unwrap().as_micros();
    assert_eq!(micros(back.item.created_at), micros(found[0].item.created_at));
}
