//! Which instance sweeps expired threads: `weft_server_sweeps` holds one row per sweep with the time it is
//! next due. An instance whose sweeper wakes claims the sweep with one statement that moves the due time
//! half an interval on, only when it has come: among instances waking in the same interval, one claims
//! it. Nothing is held between statements (the same code works behind PgBouncer in transaction mode:
//! [`crate::scale::Db`]).

use std::time::Duration;

use crate::scale::Db;

use crate::error::ServerError;

/// The sweep of expired threads, as the table names it.
const THREAD_TTL: &str = "thread_ttl";

const CLAIM: &str = "INSERT INTO weft_server_sweeps AS s (name, due_at) \
     VALUES ($1, now() + $2 * interval '1 millisecond') \
     ON CONFLICT (name) DO UPDATE SET due_at = excluded.due_at WHERE s.due_at <= now() \
     RETURNING s.name";

/// Claims this interval's thread TTL sweep: whether this instance sweeps now. The table is made with the
/// server's others ([`crate::storage::postgres::migrate`]).
pub(crate) async fn claim(db: &Db, interval: Duration) -> Result<bool, ServerError> {
    // Half an interval: an instance waking a little early for its next sweep still finds it due.
    let ahead = i64::try_from(interval.as_millis() / 2).unwrap_or(i64::MAX);
    let row: Option<String> = db
        .fetch_optional(sqlx::query_scalar::<_, String>(CLAIM).bind(THREAD_TTL).bind(ahead))
        .await
        .map_err(storage)?;
    Ok(row.is_some())
}

fn storage(e: sqlx::Error) -> ServerError {
    ServerError::from(weft_integrations::sql_checkpoint_error("postgres".to_owned(), e))
}

#[cfg(test)]
mod tests {
    use sqlx::Connection as _;

    use super::*;

    /// Several instances waking together: one claims the sweep; none claims it again until half an
    /// interval has passed. Without PostgreSQL at 127.0.0.1:5432 (`WEFT_TEST_PG_ADMIN_URL` overrides it)
    /// the test skips loudly, and fails in CI.
    #[tokio::test]
    async fn one_instance_claims_each_sweep() {
        let admin = std::env::var("WEFT_TEST_PG_ADMIN_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
        let Ok(mut conn) = sqlx::PgConnection::connect(&admin).await else {
            weft_testenv::skip_or_fail("PostgreSQL", "unreachable", "`cargo xtask services` starts it");
            return;
        };
        let name = format!("weft_sweep_{}", uuid::Uuid::new_v4().simple());
        let create = format!("CREATE DATABASE \"{name}\"");
        sqlx::raw_sql(sqlx::AssertSqlSafe(create)).execute(&mut conn).await.unwrap();
        let uri = format!("{}/{name}", admin.rsplit_once('/').unwrap().0);
        let pool = sqlx::PgPool::connect(&uri).await.unwrap();
        crate::storage::postgres::migrate(&Db::new(pool.clone(), true)).await.unwrap();
        let db = Db::new(pool.clone(), true);
        // A long interval, so that no claim comes due again while the machine is slow; the time passing
        // is then the due time moved back.
        let interval = Duration::from_secs(60);
        let claims = futures::future::join_all((0..4).map(|_| claim(&db, interval))).await;
        let won = claims.into_iter().map(Result::unwrap).filter(|c| *c).count();
        assert_eq!(won, 1, "one of four instances claims the sweep");
        assert!(!claim(&db, interval).await.unwrap(), "not due again at once");
        let ahead: f64 = sqlx::query_scalar(
            "SELECT extract(epoch FROM due_at - now())::float8 FROM weft_server_sweeps WHERE name = $1",
        )
        .bind(THREAD_TTL)
        .fetch_one(&pool)
        .await
        .unwrap();
        assert!((25.0..=30.0).contains(&ahead), "due half an interval on: in {ahead} s");
        sqlx::query("UPDATE weft_server_sweeps SET due_at = now() - interval '1 millisecond'")
            .execute(&pool)
            .await
            .unwrap();
        assert!(claim(&db, interval).await.unwrap(), "claimed again once due");
        assert!(!claim(&db, interval).await.unwrap(), "and not twice");
        pool.close().await;
        let drop = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
        sqlx::raw_sql(sqlx::AssertSqlSafe(drop)).execute(&mut conn).await.unwrap();
    }
}
