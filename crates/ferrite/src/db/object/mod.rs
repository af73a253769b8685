//! Objects: values of any size, written in place at any offset.

mod api;

pub use api::{ObjectReader, ObjectStat, ObjectWriter, MAX_OBJECT_LEN};
