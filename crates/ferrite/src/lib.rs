//! Ferrite: an ordered key-value storage engine that stays at the speed of the SSD when the
//! data is many times larger than memory.

pub mod btree;
pub mod error;
pub mod store;

pub use btree::node::MAX_KEY_LEN;
pub use error::{Error, PageId, Result};
