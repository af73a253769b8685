//! Ferrite's memcached-compatible server (`ferrite serve`). So far: [`protocol`], the
//! decoder of memcached's text and meta requests and the writer of its replies.

pub mod protocol;

#[doc(hidden)]
pub use protocol::fuzz_protocol;
