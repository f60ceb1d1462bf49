//! The PostgreSQL test server, the CI rule, and a schema per test.
//!
//! Tests talk to the server at 127.0.0.1:5432 (trust auth, database `test`, user `postgres`). Each test
//! gets a schema of its own, created here and dropped when the test's guard goes; the backends create
//! their tables in it. When the server cannot be reached: in CI (`CI` set to anything but empty, `0` or
//! `false`) the test fails; elsewhere it is skipped with a loud message.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use sqlx::Connection;
use weft_graph::checkpoint::{Intercept, Intercepted};
use weft_graph::store::{
    IndexConfig, Item, ListNamespacesOptions, PutOptions, SearchItem, SearchOptions, Store, StoreError,
};
use weft_integrations::postgres::{PostgresOptions, PostgresSaver, PostgresStore};

/// The test server (`WEFT_TEST_PG_URL` overrides it).
pub fn pg_url() -> String {
    std::env::var("WEFT_TEST_PG_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// A schema of one test, dropped (with everything in it) when this goes.
#[derive(Debug)]
pub struct TestSchema {
    pub name: String,
}

impl TestSchema {
    /// Options that put the backends' tables in this schema.
    pub fn options(&self) -> PostgresOptions {
        PostgresOptions::default().schema(self.name.clone())
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        let name = self.name.clone();
        // A runtime of its own on a thread of its own: this may run inside the test's runtime.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
            runtime.block_on(async {
                let mut conn = sqlx::PgConnection::connect(&pg_url()).await.ok()?;
                // Never wait long: a connection left in a transaction would hold the drop forever.
                let sql = format!("SET lock_timeout = '10s'; DROP SCHEMA IF EXISTS \"{name}\" CASCADE");
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await.ok()
            })
        })
        .join();
        if !matches!(dropped, Ok(Some(_))) {
            eprintln!("warning: could not drop test schema {}", self.name);
        }
    }
}

/// A fresh schema on the test server, or `None` (after a loud message) when the server cannot be reached
/// outside CI. In CI an unreachable server fails the test.
pub async fn schema() -> Option<TestSchema> {
    let connect = tokio::time::timeout(Duration::from_secs(5), sqlx::PgConnection::connect(&pg_url())).await;
    let mut conn = match connect {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => return unreachable(&e.to_string()),
        Err(_) => return unreachable("timed out after 5 s"),
    };
    let name = format!("weft_test_{}", uuid::Uuid::new_v4().simple());
    let sql = format!("CREATE SCHEMA \"{name}\"");
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await.unwrap();
    Some(TestSchema { name })
}

/// Where the test server is, without any password.
fn server() -> String {
    match pg_url().parse::<sqlx::postgres::PgConnectOptions>() {
        Ok(o) => format!("{}:{}/{}", o.get_host(), o.get_port(), o.get_database().unwrap_or_default()),
        Err(_) => "(WEFT_TEST_PG_URL does not parse)".to_owned(),
    }
}

fn unreachable<T>(why: &str) -> Option<T> {
    let what = format!("PostgreSQL at {}", server());
    weft_testenv::skip_or_fail(&what, &format!("unreachable ({why})"), "`cargo xtask services` starts it");
    None
}

/// A saver in a fresh schema, with the schema's guard (`inner()` is the saver, `intercept()` the guard).
pub type TestSaver = Intercepted<TestSchema, PostgresSaver>;

/// The guard rides along with the saver and intercepts nothing.
impl Intercept<PostgresSaver> for TestSchema {}

/// A saver in a fresh schema (`None`: skipped).
pub async fn saver() -> Option<TestSaver> {
    saver_with(|o| o).await
}

/// A saver in a fresh schema with adjusted options (`None`: skipped).
pub async fn saver_with(adjust: impl FnOnce(PostgresOptions) -> PostgresOptions) -> Option<TestSaver> {
    let schema = schema().await?;
    let saver = PostgresSaver::connect_with(&pg_url(), adjust(schema.options())).await.unwrap();
    Some(Intercepted::new(Arc::new(saver), schema))
}

/// A store in a fresh schema, with the schema's guard.
#[derive(Debug)]
pub struct TestStore {
    pub store: PostgresStore,
    pub schema: TestSchema,
}

/// A store in a fresh schema (`None`: skipped).
pub async fn store(index: Option<IndexConfig>) -> Option<TestStore> {
    let schema = schema().await?;
    let store = PostgresStore::connect_with(&pg_url(), schema.options()).await.unwrap().with_index(index);
    Some(TestStore { store, schema })
}

#[async_trait]
impl Store for TestStore {
    async fn get_with(
        &self,
        namespace: &[String],
        key: &str,
        refresh_ttl: Option<bool>,
    ) -> Result<Option<Item>, StoreError> {
        self.store.get_with(namespace, key, refresh_ttl).await
    }

    async fn put_with(
        &self,
        namespace: &[String],
        key: &str,
        value: Value,
        options: PutOptions,
    ) -> Result<(), StoreError> {
        self.store.put_with(namespace, key, value, options).await
    }

    async fn delete(&self, namespace: &[String], key: &str) -> Result<(), StoreError> {
        self.store.delete(namespace, key).await
    }

    async fn sweep_ttl(&self) -> Result<u64, StoreError> {
        self.store.sweep_ttl().await
    }

    async fn search(
        &self,
        namespace_prefix: &[String],
        options: SearchOptions,
    ) -> Result<Vec<SearchItem>, StoreError> {
        self.store.search(namespace_prefix, options).await
    }

    async fn list_namespaces(&self, options: ListNamespacesOptions) -> Result<Vec<Vec<String>>, StoreError> {
        self.store.list_namespaces(options).await
    }
}
