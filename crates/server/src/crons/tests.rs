//! The scheduler with a clock the tests move: a due cron fires once, missed fires collapse into one,
//! disabled and ended crons stay quiet, and the next time survives a restart.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use weft_graph::{END, JsonState, START, StateGraph};

use super::*;
use crate::app::App;
use crate::builder::Server;

fn graph() -> weft_graph::CompiledGraph<JsonState> {
    let mut g = StateGraph::with_initial(JsonState::builder().append("items").build());
    g.add_node("hello", |_: &JsonState| json!({"items": ["hello"]}));
    g.add_edge(START, "hello");
    g.add_edge("hello", END);
    g.compile().unwrap()
}

async fn app_at(path: Option<&std::path::Path>) -> Arc<App> {
    let builder = Server::builder().graph("simple", graph());
    let builder = match path {
        Some(path) => builder.sqlite(path),
        // The durable mode's code paths without a file, or the in-memory mode when the suite runs on it.
        None if std::env::var("WEFT_SERVER_TEST_STORAGE").as_deref() == Ok("memory") => builder.in_memory(),
        None => builder.sqlite_in_memory(),
    };
    builder.build().await.unwrap().app
}

/// A cron of `simple` every minute, on `thread_id` when given, saved as the routes save it.
async fn every_minute(app: &Arc<App>, thread_id: Option<&str>, now: SystemTime) -> Cron {
    let assistant_id = crate::graphs::default_assistant_id("simple");
    let cron_id = crate::app::new_id();
    let payload = json!({
        "assistant_id": assistant_id,
        "schedule": "* * * * *",
        "input": {"items": []},
        "metadata": {"from": "payload"},
        "config": {"configurable": {"cron_id": cron_id}},
    });
    let mut cron = Cron {
        cron_id,
        assistant_id,
        thread_id: thread_id.map(str::to_owned),
        user_id: None,
        end_time: None,
        schedule: "* * * * *".into(),
        timezone: None,
        payload: payload.as_object().unwrap().clone(),
        next_run_date: None,
        metadata: json!({"from": "cron", "cron": true}).as_object().unwrap().clone(),
        on_run_completed: thread_id.is_none().then(|| "keep".to_owned()),
        enabled: true,
        created_at: iso(now),
        updated_at: iso(now),
    };
    cron.next_run_date = next_run_date(&cron, now);
    save(app, &cron).await;
    cron
}

/// Stores `cron` as the routes do.
async fn save(app: &App, cron: &Cron) {
    let mut records = app.records.lock(crate::storage::Key::Cron(&cron.cron_id)).await.unwrap();
    records.commit(vec![Change::Cron(Box::new(cron.clone()))]).await.unwrap();
}

fn minute() -> SystemTime {
    schedule::parse_time("2031-03-04T05:06:00+00:00").unwrap()
}

async fn runs_of(app: &App, cron_id: &str) -> Vec<crate::model::RunRecord> {
    let records = app.records.lock(crate::storage::Key::All).await.unwrap();
    records
        .held_runs()
        .filter(|r| r.run.kwargs.config["configurable"]["cron_id"] == json!(cron_id))
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_due_cron_fires_once_and_moves_its_next_time_past_now() {
    let app = app_at(None).await;
    let cron = every_minute(&app, None, minute()).await;
    assert_eq!(cron.next_run_date.as_deref(), Some("2031-03-04T05:07:00+00:00"));
    // Not yet due.
    assert!(fire_due(&app, minute() + Duration::from_secs(30)).await.is_empty());
    let at = minute() + Duration::from_secs(61);
    let made = fire_due(&app, at).await;
    assert_eq!(made.len(), 1);
    // The same moment again: nothing more.
    assert!(fire_due(&app, at).await.is_empty());
    let saved = app.records.lock(crate::storage::Key::All).await.unwrap().crons[&cron.cron_id].clone();
    assert_eq!(saved.next_run_date.as_deref(), Some("2031-03-04T05:08:00+00:00"));
    let runs = runs_of(&app, &cron.cron_id).await;
    assert_eq!(runs.len(), 1);
    let run = &runs[0].run;
    // A stateless cron's run: a thread of its own, kept (`on_run_completed: keep`), the cron's metadata
    // under the payload's.
    assert_eq!(run.run_id, made[0]);
    assert!(!runs[0].delete_thread);
    assert_eq!(run.metadata["from"], "payload");
    assert_eq!(run.metadata["cron"], true);
    assert_eq!(run.kwargs.input, json!({"items": []}));
}

#[tokio::test]
async fn fires_missed_while_down_happen_once() {
    let app = app_at(None).await;
    let cron = every_minute(&app, None, minute()).await;
    // A day later: 1,440 minutes were missed; one run is made.
    let later = minute() + Duration::from_secs(86_400);
    assert_eq!(fire_due(&app, later).await.len(), 1);
    assert!(fire_due(&app, later + Duration::from_secs(10)).await.is_empty());
    assert_eq!(runs_of(&app, &cron.cron_id).await.len(), 1);
    let saved = app.records.lock(crate::storage::Key::All).await.unwrap().crons[&cron.cron_id].clone();
    assert_eq!(saved.next_run_date.as_deref(), Some("2031-03-05T05:07:00+00:00"));
}

#[tokio::test]
async fn disabled_and_ended_crons_do_not_fire() {
    let app = app_at(None).await;
    let mut off = every_minute(&app, None, minute()).await;
    off.enabled = false;
    let mut ended = every_minute(&app, None, minute()).await;
    ended.end_time = Some(iso(minute() + Duration::from_secs(30)));
    app.records
        .lock(crate::storage::Key::All)
        .await
        .unwrap()
        .commit(vec![Change::Cron(Box::new(off)), Change::Cron(Box::new(ended))])
        .await
        .unwrap();
    assert!(fire_due(&app, minute() + Duration::from_secs(120)).await.is_empty());
}

#[tokio::test]
async fn a_thread_cron_runs_on_its_thread_and_a_missing_thread_only_logs() {
    let app = app_at(None).await;
    let thread_id = crate::app::new_id();
    let stamp = iso(minute());
    let thread = crate::model::Thread {
        thread_id: thread_id.clone(),
        created_at: stamp.clone(),
        updated_at: stamp.clone(),
        state_updated_at: stamp,
        metadata: serde_json::Map::new(),
        status: crate::model::ThreadStatus::Idle,
        config: json!({}),
        values: None,
        error: None,
        interrupts: serde_json::Map::new(),
        ttl: None,
    };
    app.records
        .lock(crate::storage::Key::All)
        .await
        .unwrap()
        .commit(vec![Change::Thread(thread)])
        .await
        .unwrap();
    let cron = every_minute(&app, Some(&thread_id), minute()).await;
    let gone = every_minute(&app, Some(&crate::app::new_id()), minute()).await;
    let made = fire_due(&app, minute() + Duration::from_secs(60)).await;
    assert_eq!(made.len(), 1);
    let runs = runs_of(&app, &cron.cron_id).await;
    assert_eq!(runs[0].run.thread_id, thread_id);
    assert!(runs_of(&app, &gone.cron_id).await.is_empty());
    // The cron whose thread is gone still moved on: it does not fire again at once.
    let saved = app.records.lock(crate::storage::Key::All).await.unwrap().crons[&gone.cron_id].clone();
    assert_eq!(saved.next_run_date.as_deref(), Some("2031-03-04T05:08:00+00:00"));
}

#[tokio::test]
async fn a_context_and_the_cron_id_go_together() {
    let app = app_at(None).await;
    let mut cron = every_minute(&app, None, minute()).await;
    cron.payload.insert("context".into(), json!({"user": "u1"}));
    save(&app, &cron).await;
    assert_eq!(fire_due(&app, minute() + Duration::from_secs(60)).await.len(), 1);
    let run = runs_of(&app, &cron.cron_id).await.remove(0).run;
    assert_eq!(run.kwargs.context, json!({"user": "u1"}));
    assert_eq!(run.kwargs.config["configurable"]["cron_id"], Value::String(cron.cron_id));
}

#[tokio::test]
async fn the_next_time_survives_a_restart() {
    let dir = std::env::temp_dir().join(format!("weft-crons-{}", crate::app::new_id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("server.db");
    let cron = {
        let app = app_at(Some(&path)).await;
        let cron = every_minute(&app, None, minute()).await;
        assert_eq!(fire_due(&app, minute() + Duration::from_secs(60)).await.len(), 1);
        // One process per file: the fired run ends (and lets go of the server) before the restart.
        for _ in 0..500 {
            if Arc::strong_count(&app) == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        cron
    };
    let app = app_at(Some(&path)).await;
    let saved = app.records.lock(crate::storage::Key::All).await.unwrap().crons[&cron.cron_id].clone();
    assert_eq!(saved.next_run_date.as_deref(), Some("2031-03-04T05:08:00+00:00"));
    // Already fired for 05:07: not again at 05:07:30.
    assert!(fire_due(&app, minute() + Duration::from_secs(90)).await.is_empty());
    assert_eq!(fire_due(&app, minute() + Duration::from_secs(120)).await.len(), 1);
    drop(app);
    let _ = std::fs::remove_dir_all(&dir);
}
