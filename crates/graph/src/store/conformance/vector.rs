//! Cases for stores built with the suite's vector index ([`index_config`](super::index_config)).

use serde_json::json;

use super::kit::{Ctx, Outcome, ensure, ensure_eq, fresh_root, keys, ns, put_all};
use crate::store::{IndexFields, PutOptions, SearchOptions, Store};

/// With a query, results are ranked by cosine similarity of the indexed field, best first, each with
/// its score; filters, `limit` and `offset` still apply.
pub async fn vector_search_ranks_by_similarity(store: &dyn Store) -> Outcome {
    let namespace = ns(&fresh_root("vectors"), &["docs"]);
    put_all(
        store,
        &namespace,
        &[
            ("python", json!({"text": "python tutorial for beginners", "lang": "en"})),
            ("rust", json!({"text": "rust ownership guide", "lang": "en"})),
            ("cooking", json!({"text": "cooking pasta recipes", "lang": "it"})),
            ("snakes", json!({"text": "python snakes of the world", "lang": "en"})),
        ],
    )
    .await?;
    let query = SearchOptions::default().query("python tutorial");
    let found = store.search(&namespace, query.clone()).await.ctx("search")?;
    ensure_eq(keys(&found).first().map(String::as_str), Some("python"), "the closest item comes first")?;
    ensure_eq(keys(&found).get(1).map(String::as_str), Some("snakes"), "then the next closest")?;
    let scores: Vec<Option<f64>> = found.iter().map(|i| i.score).collect();
    ensure(scores.iter().all(Option::is_some), || format!("every indexed item gets a score: {scores:?}"))?;
    ensure(scores.windows(2).all(|w| w[0] >= w[1]), || format!("scores descend: {scores:?}"))?;
    ensure(scores[0].is_some_and(|s| s > 0.5 && s <= 1.0 + 1e-9), || {
        format!("cosine score range: {scores:?}")
    })?;
    let filtered =
        store.search(&namespace, query.clone().filter(json!({"lang": "it"}))).await.ctx("search")?;
    ensure_eq(keys(&filtered), vec!["cooking".to_owned()], "filters apply to similarity search")?;
    let page = store.search(&namespace, query.limit(1).offset(1)).await.ctx("search")?;
    ensure_eq(keys(&page), vec!["snakes".to_owned()], "offset and limit apply after ranking")
}

/// `IndexFields::Fields` embeds the named fields instead of the index's; `IndexFields::Off` gives no
/// vector, so the item has no score and comes after ranked items.
pub async fn vector_index_field_choices(store: &dyn Store) -> Outcome {
    let namespace = ns(&fresh_root("fields"), &[]);
    let off = PutOptions { index: IndexFields::Off, ..PutOptions::default() };
    store.put_with(&namespace, "unindexed", json!({"text": "quantum physics"}), off).await.ctx("put")?;
    let title = PutOptions { index: IndexFields::Fields(vec!["title".into()]), ..PutOptions::default() };
    let by_title = json!({"title": "quantum physics", "text": "gardening tips"});
    store.put_with(&namespace, "by-title", by_title, title).await.ctx("put")?;
    store
        .put(&namespace, "default", json!({"text": "gardening tips", "title": "quantum physics"}))
        .await
        .ctx("put")?;
    let found =
        store.search(&namespace, SearchOptions::default().query("quantum physics")).await.ctx("search")?;
    ensure_eq(
        keys(&found),
        vec!["by-title".to_owned(), "default".into(), "unindexed".into()],
        "ranking by fields",
    )?;
    ensure_eq(found[2].score, None, "an unindexed item has no score")?;
    ensure(found[0].score > found[1].score, || "the chosen field is what gets embedded".into())?;
    let again = PutOptions { index: IndexFields::Off, ..PutOptions::default() };
    store.put_with(&namespace, "by-title", json!({"title": "quantum physics"}), again).await.ctx("put")?;
    let found =
        store.search(&namespace, SearchOptions::default().query("quantum physics")).await.ctx("search")?;
    let unscored: Vec<_> = found.iter().filter(|i| i.score.is_none()).map(|i| i.item.key.clone()).collect();
    ensure(unscored.contains(&"by-title".to_owned()), || {
        "re-putting without index drops the old vector".into()
    })
}
