//! Code shared by the SQL backends: stored formats, row conversions, delta planning, migrations and the
//! in-weft parts of store searches. Each backend keeps its own queries.

pub(crate) mod codec;
pub(crate) mod delta;
pub(crate) mod migrate;
pub(crate) mod rows;
pub(crate) mod store_rows;

/// How much a saver stores (for benchmarks and capacity planning).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StorageStats {
    /// Checkpoint rows.
    pub checkpoints: u64,
    /// Channel value rows (whole values and deltas).
    pub blobs: u64,
    /// Pending write rows.
    pub writes: u64,
    /// Bytes of stored data in those rows (checkpoint and metadata text, blobs, keys excluded).
    pub data_bytes: u64,
}
