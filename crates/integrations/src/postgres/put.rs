//! The PostgreSQL saver's `put` statement and the checks of ids PostgreSQL text cannot hold.

use weft_graph::checkpoint::{Checkpoint, CheckpointConfig, CheckpointError};

use super::Pg;
use super::saver::backend;
use super::statements::PUT;
use crate::sql::delta::BlobRecord;

/// One statement: the checkpoint, its whole values and its deltas, all written only when every delta's
/// base is there. Returns whether it was written.
pub(super) async fn put_statement(
    pg: &Pg,
    config: &CheckpointConfig,
    checkpoint: &Checkpoint,
    body: &str,
    metadata: &str,
    records: &[&BlobRecord],
) -> Result<bool, CheckpointError> {
    let (mut whole, mut delta) = (Columns::default(), Columns::default());
    for record in records {
        let columns = if record.base_version.is_some() { &mut delta } else { &mut whole };
        columns.channels.push(&*record.channel);
        columns.versions.push(&*record.version);
        columns.bases.push(record.base_version.as_deref());
        columns.blobs.push(record.blob.as_deref());
    }
    let (whole, delta) = (&whole, &delta);
    let written: i64 = pg
        .run("put", move || {
            pg.statements.fetch_one(
                sqlx::query_scalar(PUT)
                    .bind(&config.thread_id)
                    .bind(&config.checkpoint_ns)
                    .bind(&checkpoint.id)
                    .bind(config.checkpoint_id.as_deref())
                    .bind(body)
                    .bind(metadata)
                    .bind(&whole.channels)
                    .bind(&whole.versions)
                    .bind(&whole.blobs)
                    .bind(&delta.channels)
                    .bind(&delta.versions)
                    .bind(&delta.bases)
                    .bind(&delta.blobs),
            )
        })
        .await
        .map_err(backend)?;
    Ok(written > 0)
}

#[derive(Default)]
struct Columns<'a> {
    channels: Vec<&'a str>,
    versions: Vec<&'a str>,
    bases: Vec<Option<&'a str>>,
    blobs: Vec<Option<&'a [u8]>>,
}

/// PostgreSQL text cannot hold NUL characters: such ids are refused up front, named.
pub(super) fn check_text(what: &str, text: &str) -> Result<(), CheckpointError> {
    if text.contains('\0') {
        return Err(CheckpointError::Invalid(format!(
            "{what} {text:?} contains a NUL character, which PostgreSQL text cannot store"
        )));
    }
    Ok(())
}

pub(super) fn check_config(config: &CheckpointConfig) -> Result<(), CheckpointError> {
    check_text("thread id", &config.thread_id)?;
    check_text("checkpoint namespace", &config.checkpoint_ns)?;
    config.checkpoint_id.as_deref().map_or(Ok(()), |id| check_text("checkpoint id", id))
}
