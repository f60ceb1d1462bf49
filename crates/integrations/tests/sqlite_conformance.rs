#![allow(clippy::unwrap_used, missing_docs)]
//! The checkpointer and store conformance suites on SQLite: in memory, and on a file.

#![cfg(feature = "sqlite")]

use weft_graph::store::IndexConfig;
use weft_integrations::sqlite::{SqliteSaver, SqliteStore};

mod in_memory {
    use super::*;

    weft_graph::checkpointer_conformance_tests!(SqliteSaver::in_memory().await.unwrap());

    weft_graph::store_conformance_tests!(|index: Option<IndexConfig>| async move {
        SqliteStore::in_memory().await.unwrap().with_index(index)
    });
}

mod on_file {
    use super::*;

    /// A database file in a fresh temporary directory (left for the OS to clean).
    fn temp_db() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("weft-sqlite-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("weft.db")
    }

    weft_graph::checkpointer_conformance_tests!(SqliteSaver::open(temp_db()).await.unwrap());

    weft_graph::store_conformance_tests!(|index: Option<IndexConfig>| async move {
        SqliteStore::open(temp_db()).await.unwrap().with_index(index)
    });
}
