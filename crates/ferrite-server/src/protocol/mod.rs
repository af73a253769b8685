//! memcached's text and meta protocols, as memcached 1.6 speaks them: [`decode`] reads
//! requests from a connection's read buffer, the `write_*` functions append replies to its
//! output buffer. No I/O and no storage here.
//!
//! # The decoder's contract
//!
//! [`decode`] looks at the front of the buffer and answers one of:
//!
//! - [`Decoded::NeedMore`]: no whole request yet; append what the socket gives and call again.
//!   A request split anywhere decodes as `NeedMore` until its last byte arrives, then exactly
//!   as if it had arrived at once.
//! - [`Decoded::Request`]: a request that borrows its keys and data from the buffer, and how
//!   many bytes it took. Pipelined requests decode one per call, in order.
//! - [`Decoded::Error`]: a refused request: the error to reply (none under `noreply`, and none
//!   for hostile input memcached drops silently), how many bytes to discard (possibly more
//!   than the buffer holds: the refused data of a storage command is swallowed as it
//!   arrives, never read as commands), and whether to close the connection.
//!
//! Every call makes progress or asks for more, never panics, and never needs more than
//! [`Limits::buffer_max_bytes`] bytes buffered to decide:
//!
//! - A line without a newline within [`LINE_MAX_BYTES`] (2048) bytes closes the connection,
//!   as memcached closes it, unless it starts as `get `/`gets ` (memcached buffers those
//!   without bound; Ferrite up to [`Limits::multiget_line_max_bytes`], then closes).
//! - A value longer than [`Limits::item_max_bytes`] is answered
//!   `SERVER_ERROR object too large for cache` and swallowed; a `<bytes>` that is negative
//!   or beyond 2^31 - 3 is `CLIENT_ERROR bad command line format` with nothing swallowed.
//! - Keys are 1..=250 bytes, without control characters (memcached itself lets control
//!   characters through; the protocol text forbids them). Meta keys given with `b` are
//!   decoded from base64 (at most 250 characters encoded).
//!
//! Fields are checked in the order memcached checks them, so a line with several faults
//! gets memcached's error. Where the error depends on the stored item (`EXISTS`, a
//! non-numeric `incr`), the server decides and writes it with [`write_error`].
//!
//! Commands served: `get gets gat gats set add replace append prepend cas incr decr touch
//! delete flush_all stats version verbosity quit` and `mg ms md ma mn me`, and Ferrite's own
//! `backup <name>` (an online backup, when the server has a backup directory). memcached's admin
//! commands (`slabs`, `lru`, `lru_crawler`, `watch`, `shutdown`, `cache_memlimit`,
//! `extstore`) are answered `ERROR`, as an unknown command is.

mod base64;
mod decode;
mod error;
mod fuzz;
mod meta;
mod number;
mod reply;
mod request;

pub use decode::{decode, Decoded, Limits, BACKUP_NAME_MAX_BYTES, LINE_MAX_BYTES};
pub use error::ProtocolError;
pub use fuzz::fuzz_protocol;
pub use meta::{MetaCommand, MetaStatus};
pub use reply::{
    write_end, write_error, write_meta, write_meta_debug, write_meta_noop, write_number,
    write_stat, write_status, write_value, write_value_line, write_version, MetaDebug, MetaItem,
    MetaReply, Status,
};
pub use request::{
    BinaryKey, GetCommand, Key, Keys, MetaFlags, Request, StoreCommand, BINARY_KEY_MAX_BYTES,
    KEY_MAX_BYTES, OPAQUE_TOKEN_MAX_BYTES,
};
