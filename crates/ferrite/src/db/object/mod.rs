//! Objects: values of any size, written in place at any offset (see `format.rs` for the
//! layout, `space.rs` for free space and readers, `ops.rs` for the operations, `merge.rs`
//! for the lazy merge of fragments, `api.rs` for the public calls, `at.rs` for reads through
//! snapshots).

mod api;
mod async_ops;
mod at;
mod check;
mod format;
mod merge;
mod ops;
mod space;

pub(crate) use api::check_object_end;
pub use api::{ObjectReader, ObjectStat, ObjectWriter, ValueSlices, MAX_OBJECT_LEN};
pub(in crate::db) use at::{read_object_at, FragmentLogAt};
pub use check::ObjectsReport;
#[doc(hidden)]
pub use format::fuzz_object_entry;
pub(crate) use format::{is_stub, needs_object};
#[cfg(any(test, feature = "testing"))]
pub(crate) use merge::set_idle_wait as set_merge_idle_wait;
pub(crate) use ops::{Prepared, PreparedBlocks, Stored};
pub(crate) use space::Space;
