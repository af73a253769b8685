//! Errors from the peer engines: which engine, which call, and what the engine said.

use std::fmt;
use std::io;

/// Everything that can go wrong in a call into a peer engine.
#[derive(Debug)]
pub enum PeerError {
    /// A call into the engine's library failed.
    Engine {
        /// "rocksdb", "wiredtiger" or "lmdb".
        engine: &'static str,
        /// The library function that failed, e.g. `rocksdb_open`.
        call: &'static str,
        /// The engine's return code where it has one (WiredTiger, LMDB).
        code: Option<i32>,
        /// The engine's own message.
        message: String,
    },
    /// A file system call made on the engine's behalf (creating its directory) failed.
    Io { engine: &'static str, context: String, source: io::Error },
    /// The request cannot be passed to the engine (a path with a NUL byte, options that
    /// contradict each other).
    Invalid { engine: &'static str, reason: String },
    /// A transaction met another one's change (RocksDB's `Busy` or `TryAgain` at commit,
    /// WiredTiger's `WT_ROLLBACK`): it wrote nothing and may be run again.
    Conflict { engine: &'static str, call: &'static str, message: String },
}

impl PeerError {
    /// The engine the error came from.
    pub fn engine(&self) -> &'static str {
        match self {
            PeerError::Engine { engine, .. }
            | PeerError::Io { engine, .. }
            | PeerError::Invalid { engine, .. }
            | PeerError::Conflict { engine, .. } => engine,
        }
    }
}

impl PeerError {
    /// Whether this is a transaction's conflict (run the transaction again).
    pub fn is_conflict(&self) -> bool {
        matches!(self, PeerError::Conflict { .. })
    }
}

impl fmt::Display for PeerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerError::Engine { engine, call, code: Some(code), message } => {
                write!(f, "{engine}: {call} failed ({code}): {message}")
            }
            PeerError::Engine { engine, call, code: None, message } => {
                write!(f, "{engine}: {call} failed: {message}")
            }
            PeerError::Io { engine, context, source } => write!(f, "{engine}: {context}: {source}"),
            PeerError::Invalid { engine, reason } => write!(f, "{engine}: {reason}"),
            PeerError::Conflict { engine, call, message } => {
                write!(f, "{engine}: {call}: a conflict with another transaction: {message}")
            }
        }
    }
}

impl std::error::Error for PeerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PeerError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
