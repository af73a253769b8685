//! Operating errors: everything a caller can cause or the machine can do to us.
//!
//! Broken invariants are not errors: they panic. An error is what a caller must be able to
//! handle; a panic is a bug in Ferrite.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// A page number: the page's byte offset in the page file divided by the page size.
pub type PageId = u64;

/// Everything that can go wrong in a call into Ferrite. New kinds of error may come in
/// later versions (it is `#[non_exhaustive]`): a `match` over it ends with a `_` arm.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An I/O system call failed; `context` says what Ferrite was doing.
    Io {
        /// What Ferrite was doing, as the words after "while" in the message ("reading
        /// page 7 of pages.ferrite").
        context: String,
        /// The system's error.
        source: io::Error,
    },
    /// A page's checksum, identity or structure is wrong: the data is not trusted.
    Corrupt {
        /// The page (0 when the damage is not in one page, as in an object's extent map).
        page: PageId,
        /// The file, or the data directory, the page belongs to.
        file: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The directory is not a Ferrite data directory (no or unreadable superblock).
    NotADatabase {
        /// The directory.
        path: PathBuf,
        /// Why it is not one.
        reason: String,
    },
    /// Another `Db` (in this or another process) has the directory open in a way this open
    /// cannot share (a writer needs it to itself; readers share it): `by` names the holders.
    Locked {
        /// The directory.
        path: PathBuf,
        /// The holders, from the system's lock table (process ids, writers and readers).
        by: String,
    },
    /// A key is longer than [`crate::MAX_KEY_LEN`].
    KeyTooLarge {
        /// The key's length in bytes.
        len: usize,
        /// The longest key, in bytes.
        max: usize,
    },
    /// Keys must hold at least one byte.
    KeyEmpty,
    /// A value is longer than the largest object ([`crate::MAX_OBJECT_LEN`]).
    ValueTooLarge {
        /// The value's length in bytes (`usize::MAX` for a write, truncation or read that
        /// would end past the largest object, or past what memory can hold).
        len: usize,
        /// The longest value, in bytes.
        max: usize,
    },
    /// No tree of that name exists (or it was dropped while a handle was in use).
    TreeNotFound {
        /// The tree's name.
        name: String,
    },
    /// A tree of that name exists already.
    TreeExists {
        /// The tree's name.
        name: String,
    },
    /// A tree name is empty or longer than [`crate::MAX_TREE_NAME_LEN`].
    BadTreeName {
        /// The name refused.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The page file reached `Options::max_size_bytes`.
    DatabaseFull {
        /// The pages `Options::max_size_bytes` allows.
        max_pages: u64,
    },
    /// Every frame of the pool is latched: the pool is too small for this many threads.
    PoolExhausted {
        /// The pool's size in pages.
        pool_pages: u64,
    },
    /// An option is out of its range, or a call was given a handle of another database.
    BadOptions {
        /// Which option, and its range.
        reason: String,
    },
    /// The database was closed; this handle is no longer usable.
    Closed,
    /// The database was opened with `Options::read_only`.
    ReadOnly,
    /// `Db::spawn` on a database opened with `Options::workers == 0`.
    NoWorkers,
    /// A blocking write call made inside a task: it could wait for a commit or a log flush
    /// that only this worker's own loop can finish.
    BlockingWriteInTask,
    /// An `*_async` call polled outside a task (on a thread of another executor, say): a
    /// miss there would block that thread. Run it inside [`Db::spawn`](crate::Db::spawn),
    /// whose handle any executor can await, or use the blocking call.
    NotInTask {
        /// The call, such as `Tree::get_async`.
        call: &'static str,
    },
    /// A batch changes more than the pool can hold pinned while it commits.
    BatchTooLarge {
        /// The batch's changes.
        ops: usize,
        /// The most changes a batch may have with this pool (a quarter of its pages).
        max_ops: usize,
        /// The pool's size in pages.
        pool_pages: u64,
    },
    /// A transaction's commit found that a key it read changed since; nothing was written.
    Conflict {
        /// The tree of the key.
        tree: String,
        /// The first key found changed.
        key: Vec<u8>,
    },
    /// A transaction's add ([`Transaction::add`](crate::Transaction::add)) found at its
    /// commit a value that is not a counter (8 bytes), or a sum out of range; nothing was
    /// written.
    BadCounter {
        /// The tree of the key.
        tree: String,
        /// The key.
        key: Vec<u8>,
        /// What is wrong.
        reason: String,
    },
    /// A write or sync of the log failed: the database refuses writes until reopened.
    LogFailed {
        /// The first failure, as it was reported.
        reason: String,
    },
    /// The log is damaged: bytes that were written whole read back wrong, a segment is missing
    /// or damaged, or the pages prove the log was cut (never a tail torn by a crash, which
    /// recovery cuts). `path` is the file (a segment, or the log directory), `offset` the byte
    /// in it and `lsn` the log position, where known.
    LogCorrupt {
        /// The segment file, or the log directory.
        path: PathBuf,
        /// The byte in `path`, where known.
        offset: Option<u64>,
        /// The log position, where known.
        lsn: Option<u64>,
        /// What is wrong.
        reason: String,
    },
    /// A snapshot was ended early: the copies of pages it would read outgrew
    /// `Options::snapshot_bytes` (the oldest snapshots end first). Take a new one.
    SnapshotTooOld {
        /// The commit number the snapshot saw up to.
        seq: u64,
        /// `Options::snapshot_bytes`.
        limit_bytes: u64,
    },
    /// The call cannot do this (yet): `reason` says what to do instead.
    NotSupported {
        /// What cannot be done, and what to do instead.
        reason: String,
    },
}

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        Error::Io { context: context.into(), source }
    }

    /// A copy for another waiter on the same failed read (`io::Error` is not `Clone`: the
    /// copy keeps its kind, OS error code and message).
    pub(crate) fn duplicate(&self) -> Error {
        match self {
            Error::Io { context, source } => {
                let source = match source.raw_os_error() {
                    Some(code) => io::Error::from_raw_os_error(code),
                    None => io::Error::new(source.kind(), source.to_string()),
                };
                Error::Io { context: context.clone(), source }
            }
            Error::Corrupt { page, file, reason } => {
                Error::Corrupt { page: *page, file: file.clone(), reason: reason.clone() }
            }
            other => Error::Io {
                context: "loading a page".into(),
                source: io::Error::other(other.to_string()),
            },
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { context, source } => write!(f, "I/O error while {context}: {source}"),
            Error::Corrupt { page, file, reason } => {
                write!(f, "corrupt page {page} in {}: {reason}", file.display())
            }
            Error::NotADatabase { path, reason } => {
                write!(f, "{} is not a Ferrite data directory: {reason}", path.display())
            }
            Error::Locked { path, by } => write!(
                f,
                "{} is in use by {by} (a writer needs the directory to itself; readers share it)",
                path.display()
            ),
            Error::KeyTooLarge { len, max } => {
                write!(f, "key of {len} bytes is larger than the maximum of {max} bytes")
            }
            Error::KeyEmpty => write!(f, "keys must not be empty"),
            Error::ValueTooLarge { len, max } => {
                write!(f, "value of {len} bytes is larger than the maximum of {max} bytes")
            }
            Error::TreeNotFound { name } => write!(f, "no tree named {name:?}"),
            Error::TreeExists { name } => write!(f, "a tree named {name:?} exists already"),
            Error::BadTreeName { name, reason } => write!(f, "bad tree name {name:?}: {reason}"),
            Error::DatabaseFull { max_pages } => {
                write!(f, "database is full: {max_pages} pages (raise Options::max_size_bytes)")
            }
            Error::PoolExhausted { pool_pages } => {
                write!(f, "all {pool_pages} pool pages are latched; raise Options::pool_bytes")
            }
            Error::BadOptions { reason } => write!(f, "bad options: {reason}"),
            Error::Closed => write!(f, "the database is closed"),
            Error::ReadOnly => write!(f, "the database was opened read-only"),
            Error::NoWorkers => {
                write!(f, "the database has no workers to run tasks (Options::workers is 0)")
            }
            Error::BlockingWriteInTask => write!(
                f,
                "a blocking write cannot run inside a task (it could wait for its own worker): \
                 use the *_async call (put_async, delete_async, update_async, Db::write_async)"
            ),
            Error::NotInTask { call } => write!(
                f,
                "{call} ran outside a task, where a miss would block the thread that polls it: \
                 run it inside Db::spawn (the handle is a future any executor can await), or \
                 use the blocking call"
            ),
            Error::BatchTooLarge { ops, max_ops, pool_pages } => write!(
                f,
                "a batch of {ops} changes is too large for a pool of {pool_pages} pages (at most \
                 {max_ops}: split it, or raise Options::pool_bytes)"
            ),
            Error::NotSupported { reason } => write!(f, "not supported: {reason}"),
            Error::SnapshotTooOld { seq, limit_bytes } => write!(
                f,
                "snapshot {seq} was ended: the page copies kept for snapshots passed \
                 Options::snapshot_bytes ({limit_bytes} bytes), and it was the oldest; take a \
                 new snapshot, end snapshots sooner, or raise the limit"
            ),
            Error::Conflict { tree, key } => write!(
                f,
                "transaction conflict: key \"{}\" of tree {tree:?} changed after the \
                 transaction read it; nothing was written (run the transaction again)",
                key.escape_ascii()
            ),
            Error::BadCounter { tree, key, reason } => write!(
                f,
                "cannot add to key \"{}\" of tree {tree:?}: {reason}; nothing was written",
                key.escape_ascii()
            ),
            Error::LogFailed { reason } => write!(
                f,
                "the write-ahead log failed ({reason}); the database refuses writes until it \
                 is reopened"
            ),
            Error::LogCorrupt { path, offset, lsn, reason } => {
                write!(f, "the write-ahead log is damaged: {}", path.display())?;
                match (offset, lsn) {
                    (Some(offset), Some(lsn)) => {
                        write!(f, " at byte {offset} (log position {lsn})")?
                    }
                    (Some(offset), None) => write!(f, " at byte {offset}")?,
                    (None, Some(lsn)) => write!(f, " at log position {lsn}")?,
                    (None, None) => {}
                }
                write!(f, ": {reason}")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Ferrite's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
