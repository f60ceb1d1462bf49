//! How a statement reaches a PostgreSQL pool: prepared, or unnamed in a transaction of its own behind a
//! transaction-mode pooler. One mechanism for the saver, the store and weft-server's scaled records and
//! queue.

use futures::future::BoxFuture;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgArguments, PgConnection, PgQueryResult, PgRow};
use sqlx::query::{Query, QueryAs, QueryScalar};
use sqlx::{FromRow, PgPool, Postgres, Transaction};

/// What a transaction of a statement sent unnamed starts with. Read committed is PostgreSQL's default
/// and what every such statement is written for (a lock taken in a statement, then rows read with a
/// snapshot taken after it), whatever a server's `default_transaction_isolation` says.
const BEGIN: &str = "BEGIN ISOLATION LEVEL READ COMMITTED";

/// A PostgreSQL pool and how statements reach it. With `prepared`, as sqlx sends them: named, prepared
/// once per connection and cached. Without (behind a transaction-mode pooler without prepared-statement
/// support, such as PgBouncer before 1.21), each statement is unnamed and runs in a transaction of its
/// own: sqlx sends a statement with parameters as two messages each ended by a Sync (Parse, then Bind
/// and Execute), and such a pooler may hand the second to another server connection, which lacks that
/// unnamed statement (or holds another client's), unless a transaction keeps both on one. That costs
/// two round trips more per statement.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct PgStatements {
    /// The pool.
    pub pool: PgPool,
    /// Whether statements may be named and prepared (`false` behind a transaction-mode pooler).
    pub prepared: bool,
}

impl PgStatements {
    /// Statements on `pool`, prepared or not.
    pub fn new(pool: PgPool, prepared: bool) -> Self {
        Self { pool, prepared }
    }

    /// Every row of `query`, as sqlx's `fetch_all`.
    pub async fn fetch_all<Q: PgQuery>(&self, query: Q) -> Result<Vec<Q::Row>, sqlx::Error> {
        let mut on = self.connection().await?;
        let out = query.persistent(self.prepared).fetch_all(on.conn()).await?;
        on.done().await?;
        Ok(out)
    }

    /// The first row of `query` ([`sqlx::Error::RowNotFound`] when none), as sqlx's `fetch_one`.
    pub async fn fetch_one<Q: PgQuery>(&self, query: Q) -> Result<Q::Row, sqlx::Error> {
        let mut on = self.connection().await?;
        let out = query.persistent(self.prepared).fetch_one(on.conn()).await?;
        on.done().await?;
        Ok(out)
    }

    /// The first row of `query`, if any, as sqlx's `fetch_optional`.
    pub async fn fetch_optional<Q: PgQuery>(&self, query: Q) -> Result<Option<Q::Row>, sqlx::Error> {
        let mut on = self.connection().await?;
        let out = query.persistent(self.prepared).fetch_optional(on.conn()).await?;
        on.done().await?;
        Ok(out)
    }

    /// Runs `query` for its effect, as sqlx's `execute`.
    pub async fn execute(
        &self,
        query: Query<'_, Postgres, PgArguments>,
    ) -> Result<PgQueryResult, sqlx::Error> {
        let mut on = self.connection().await?;
        let out = query.persistent(self.prepared).execute(on.conn()).await?;
        on.done().await?;
        Ok(out)
    }

    /// Where the next statement runs: a pooled connection, or one in a transaction of its own.
    async fn connection(&self) -> Result<On, sqlx::Error> {
        if self.prepared {
            Ok(On::Pooled(self.pool.acquire().await?))
        } else {
            Ok(On::Transaction(self.pool.begin_with(BEGIN).await?))
        }
    }
}

/// A connection for one statement (see [`PgStatements`]).
enum On {
    Pooled(PoolConnection<Postgres>),
    /// Rolled back if dropped before [`On::done`].
    Transaction(Transaction<'static, Postgres>),
}

impl On {
    fn conn(&mut self) -> &mut PgConnection {
        match self {
            Self::Pooled(conn) => conn,
            Self::Transaction(tx) => tx,
        }
    }

    /// The statement succeeded: commits its transaction, if it has one.
    async fn done(self) -> Result<(), sqlx::Error> {
        match self {
            Self::Pooled(_) => Ok(()),
            Self::Transaction(tx) => tx.commit().await,
        }
    }
}

/// A PostgreSQL query of sqlx ([`sqlx::query`], [`sqlx::query_as`], [`sqlx::query_scalar`]) that
/// [`PgStatements`] runs, persistent (named and cached) or not.
#[doc(hidden)]
pub trait PgQuery: Send + Sized {
    /// What one row of it reads as.
    type Row: Send;

    /// This query, prepared as a named, cached statement or not.
    fn persistent(self, persistent: bool) -> Self;

    /// Its rows.
    fn fetch_all<'c>(self, conn: &'c mut PgConnection) -> BoxFuture<'c, Result<Vec<Self::Row>, sqlx::Error>>
    where
        Self: 'c;

    /// Its first row, which must exist.
    fn fetch_one<'c>(self, conn: &'c mut PgConnection) -> BoxFuture<'c, Result<Self::Row, sqlx::Error>>
    where
        Self: 'c;

    /// Its first row, if any.
    fn fetch_optional<'c>(
        self,
        conn: &'c mut PgConnection,
    ) -> BoxFuture<'c, Result<Option<Self::Row>, sqlx::Error>>
    where
        Self: 'c;
}

/// Implements [`PgQuery`] by sqlx's methods of the same names.
macro_rules! pg_query {
    ($(impl<$($generic:tt),*> $query:ty => $row:ty { $($bound:tt)* })+) => {$(
        impl<$($generic),*> PgQuery for $query
        where
            $($bound)*
        {
            type Row = $row;

            fn persistent(self, persistent: bool) -> Self {
                <$query>::persistent(self, persistent)
            }

            fn fetch_all<'c>(self, conn: &'c mut PgConnection) -> BoxFuture<'c, Result<Vec<$row>, sqlx::Error>>
            where
                Self: 'c,
            {
                Box::pin(<$query>::fetch_all(self, conn))
            }

            fn fetch_one<'c>(self, conn: &'c mut PgConnection) -> BoxFuture<'c, Result<$row, sqlx::Error>>
            where
                Self: 'c,
            {
                Box::pin(<$query>::fetch_one(self, conn))
            }

            fn fetch_optional<'c>(
                self,
                conn: &'c mut PgConnection,
            ) -> BoxFuture<'c, Result<Option<$row>, sqlx::Error>>
            where
                Self: 'c,
            {
                Box::pin(<$query>::fetch_optional(self, conn))
            }
        }
    )+};
}

pg_query! {
    impl<'q> Query<'q, Postgres, PgArguments> => PgRow {}
    impl<'q, O> QueryAs<'q, Postgres, O, PgArguments> => O { O: Send + Unpin + for<'r> FromRow<'r, PgRow>, }
    impl<'q, O> QueryScalar<'q, Postgres, O, PgArguments> => O {
        O: Send + Unpin,
        (O,): Send + Unpin + for<'r> FromRow<'r, PgRow>,
    }
}
