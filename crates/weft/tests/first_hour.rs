//! What a new user meets in the first hour, in the shorter form weft now allows: errors that convert with
//! `?` and read well from `main`, nodes and tools without ceremony.
#![allow(clippy::unwrap_used, missing_docs)]

use weft::prelude::*;

/// `main() -> weft::Result<()>` takes `?` on the errors of a weft program.
#[tokio::test]
async fn question_mark_converts_io_json_and_saver_errors() {
    async fn program(dir: &std::path::Path) -> weft::Result<()> {
        std::fs::create_dir_all(dir)?; // std::io::Error
        let settings: serde_json::Value = serde_json::from_str("{\"model\": \"gpt-4o-mini\"}")?; // serde_json
        assert_eq!(settings["model"], "gpt-4o-mini");
        #[cfg(feature = "sqlite")]
        let _saver = weft::sqlite::SqliteSaver::open(dir.join("threads.db")).await?; // CheckpointError
        std::fs::read_to_string(dir.join("missing.txt"))?;
        Ok(())
    }
    let dir = std::env::temp_dir().join(format!("weft-first-hour-{}", std::process::id()));
    let err = program(&dir).await.unwrap_err();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        err.downcast_custom::<std::io::Error>().map(std::io::Error::kind),
        Some(std::io::ErrorKind::NotFound)
    );
}

/// A failed run prints, in `main`'s `Error: {:?}`, the readable chain rather than nested variants.
#[tokio::test]
async fn a_failed_run_debug_prints_the_readable_chain() {
    let mut graph = StateGraph::<MessagesState>::new();
    graph.add_node("fetch", |_: MessagesState| async {
        std::fs::read_to_string("/no/such/weft/input.txt")?;
        Ok::<_, weft::Error>(MessagesState::update())
    });
    graph.add_edge(START, "fetch");
    let app = graph.compile().unwrap();
    // What `?` in `main() -> weft::Result<()>` makes of the run's error.
    let err: weft::Error =
        app.invoke(MessagesState::update(), &RunnableConfig::default()).await.unwrap_err().into();
    let readable = format!("{err:?}");
    assert!(readable.starts_with("node 'fetch' of graph"), "{readable}");
    assert!(readable.contains("failed at step 1: No such file or directory"), "{readable}");
    assert!(!readable.contains("Custom("), "{readable}");
    // The structure stays reachable.
    assert!(format!("{err:#?}").starts_with("Custom(\n    Node {"), "{err:#?}");
}
