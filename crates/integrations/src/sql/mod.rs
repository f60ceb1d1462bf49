//! Code shared by the SQL backends: stored formats, row conversions, delta planning, migrations and the
//! in-weft parts of store searches. Each backend keeps its own queries.

pub(crate) mod codec;
pub(crate) mod delta;
pub(crate) mod migrate;
pub(crate) mod rows;
pub(crate) mod store_rows;
