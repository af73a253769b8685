//! Ferrite's memcached-compatible server (`ferrite serve`): [`protocol`] decodes memcached's
//! text and meta requests and writes its replies; [`store`] runs them against items in a
//! Ferrite tree (`item.rs` says how an item is stored); [`server`] accepts connections and
//! serves each from a task on the database's workers, its socket calls and its disk I/O on
//! the same worker's ring (`ferrite::sched::net`).

pub mod auth;
pub mod backup;
pub mod item;
mod locks;
pub mod protocol;
pub mod server;
mod slices;
pub mod store;
mod sweep;

#[doc(hidden)]
pub use protocol::fuzz_protocol;
pub use server::{Server, ServerConfig};
