//! What every command shares: opening the data directory with the right options, running
//! an operation on it and closing it, the outcome of a command and its exit status, and the
//! errors a command can end with.

use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use ferrite::{Db, Durability, Options};
use ferrite_bench::BenchError;

use crate::cli::DbArgs;

/// How a command ended, when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Exit status 0.
    Done,
    /// The key is absent (`get`, `del`): exit status 1.
    Absent,
    /// `check` found faults: exit status 1.
    Faults,
}

impl Outcome {
    pub fn exit_status(self) -> u8 {
        match self {
            Outcome::Done => 0,
            Outcome::Absent | Outcome::Faults => 1,
        }
    }
}

/// Exit status of every error.
pub const ERROR_STATUS: u8 = 2;

/// Why a command failed (exit status 2).
#[derive(Debug)]
pub enum CliError {
    Engine(ferrite::Error),
    Bench(BenchError),
    /// Writing the output failed.
    Output(io::Error),
    /// Reading the bytes to store failed: `--value-file PATH` (`from` names it, or
    /// "standard input").
    Input {
        from: String,
        source: io::Error,
    },
    /// Opening or writing the file of `--output PATH` failed.
    OutputFile {
        path: PathBuf,
        source: io::Error,
    },
    /// A request refused before anything was done (bytes that would end past the largest
    /// object).
    Refused(String),
    /// A `write-at` that failed (`error`) after its first `written` bytes, from `offset`,
    /// were written (each piece is a change of its own).
    Partial {
        error: Box<CliError>,
        offset: u64,
        written: u64,
    },
    /// `stats --server ADDR`: asking the server at `addr` failed (`reason`).
    Server {
        addr: String,
        reason: String,
    },
    /// The operation failed (`error`), and closing the data directory `dir` after it failed
    /// too (`close`).
    AndClose {
        error: Box<CliError>,
        dir: PathBuf,
        close: ferrite::Error,
    },
}

impl CliError {
    /// A reader that went away (`ferrite scan | head`) is not an error worth a message.
    pub fn is_broken_pipe(&self) -> bool {
        match self {
            CliError::Output(e) | CliError::OutputFile { source: e, .. } => {
                e.kind() == io::ErrorKind::BrokenPipe
            }
            CliError::AndClose { error, .. } => error.is_broken_pipe(),
            _ => false,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Engine(e @ ferrite::Error::Locked { by, .. }) if by.contains(" serve") => {
                // Another process cannot read beside a writer (pages are written in place,
                // and the log's segments are reused): the server is the way in.
                write!(
                    f,
                    "{e}. It is a running `ferrite serve`: read and write through it \
                     (memcached's protocol; `backup NAME` makes an online backup when it runs \
                     with --backup-dir; `ferrite stats --server ADDR` shows its counters), \
                     or stop it (SIGTERM) and run this again"
                )
            }
            CliError::Engine(e) => write!(f, "{e}"),
            CliError::Bench(e) => write!(f, "bench: {e}"),
            CliError::Output(e) => write!(f, "writing the output failed: {e}"),
            CliError::Input { from, source } => write!(f, "reading {from} failed: {source}"),
            CliError::OutputFile { path, source } => {
                write!(f, "writing the output to {} failed: {source}", path.display())
            }
            CliError::Refused(message) => write!(f, "{message}"),
            CliError::Server { addr, reason } => {
                write!(f, "asking the server at {addr} for its stats: {reason}")
            }
            CliError::Partial { error, offset, written } => write!(
                f,
                "{error} (after {written} bytes from offset {offset} were written, up to offset \
                 {}: they stay)",
                offset + written
            ),
            CliError::AndClose { error, dir, close } => {
                write!(f, "{error} (closing {} afterwards failed too: {close})", dir.display())
            }
        }
    }
}

impl std::error::Error for CliError {}

impl From<ferrite::Error> for CliError {
    fn from(e: ferrite::Error) -> Self {
        CliError::Engine(e)
    }
}

impl From<BenchError> for CliError {
    fn from(e: BenchError) -> Self {
        CliError::Bench(e)
    }
}

impl From<io::Error> for CliError {
    fn from(e: io::Error) -> Self {
        CliError::Output(e)
    }
}

/// Whether a command may create the data directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Create the directory and its files if they do not exist (`put`, `write-at`,
    /// `trees --create`).
    Create,
    /// The directory must be a Ferrite data directory already; anything else is an error.
    Existing,
    /// As `Existing`, and nothing on disk changes (`get`, `scan`, `read-at`, `stat`, `trees`,
    /// `stats`, `check`).
    ReadOnly,
}

/// Bytes of keys and values a bulk command (`load`, `compact`) commits in one batch at most.
pub const BATCH_BYTES: usize = 8 << 20;

/// Entries a bulk command commits in one batch at most: a quarter of the pool's pages, as
/// the engine allows one commit (every change pins its leaf until logged).
pub fn max_batch_entries(db: &DbArgs) -> usize {
    ((db.pool_mib << 20) / 4096 / 4).max(1) as usize
}

/// The engine options for `db`.
pub fn options(db: &DbArgs, access: Access) -> Options {
    Options {
        pool_bytes: db.pool_mib << 20,
        direct_io: db.direct_io,
        create_if_missing: access == Access::Create,
        read_only: access == Access::ReadOnly,
        // Another command holding the directory (a `put` beside a `get`) is waited for.
        lock_wait: LOCK_WAIT,
        // One-shot commands use the blocking API on this thread: no workers to start.
        workers: 0,
        // A change is durable (in the synced log) when `put`, `del` or `trees` returns, even
        // if the clean close after it never happens.
        durability: Durability::Sync,
        ..Options::default()
    }
}

/// How long a command waits for a directory another process holds (a writer needs it to
/// itself; readers share it) before failing with the holder's pid.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Opens the data directory of `db`.
pub fn open(db: &DbArgs, access: Access) -> Result<Db, ferrite::Error> {
    Db::open(&db.dir, options(db, access))
}

/// What an operation did to the data directory, for the warning printed when closing the
/// directory after it fails. `what` names the operation: "the put", "creating tree \"t\"".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Nothing was changed: a read, or a `del` of an absent key.
    Nothing(String),
    /// A change committed to the synced write-ahead log (`Durability::Sync`): the next open
    /// applies it whatever the close does.
    Durable(String),
}

/// Runs `operation` on `db`, then closes `db`. The command's result is the operation's: a
/// close that fails after the operation succeeded is a warning on stderr saying what became
/// of the operation (its change is durable, or there was none), not a failure.
pub fn operate_then_close<T>(
    db: ferrite::Db,
    dir: &Path,
    operation: impl FnOnce(&ferrite::Db) -> Result<(T, Change), CliError>,
) -> Result<T, CliError> {
    let outcome = operation(&db);
    let closed = db.close();
    settle(dir, outcome, closed, &mut io::stderr())
}

/// The result of a command whose operation ended with `outcome` and whose close of `dir`
/// then ended with `closed`; warnings go to `warnings` (stderr).
pub fn settle<T>(
    dir: &Path,
    outcome: Result<(T, Change), CliError>,
    closed: ferrite::Result<()>,
    warnings: &mut dyn Write,
) -> Result<T, CliError> {
    match (outcome, closed) {
        (Ok((value, _)), Ok(())) => Ok(value),
        (Ok((value, change)), Err(close)) => {
            // Stderr may be gone too; the exit status still says what happened.
            let _ = writeln!(warnings, "ferrite: warning: {}", close_warning(dir, &change, &close));
            Ok(value)
        }
        (Err(error), Ok(())) => Err(error),
        (Err(error), Err(close)) => {
            Err(CliError::AndClose { error: Box::new(error), dir: dir.to_owned(), close })
        }
    }
}

/// What a failed close of `dir` means after `change`.
fn close_warning(dir: &Path, change: &Change, close: &ferrite::Error) -> String {
    let dir = dir.display();
    match change {
        Change::Durable(what) => format!(
            "{what} is durable (in the synced write-ahead log), but closing {dir} then failed: \
             {close}. Every later open replays the log, which applies {what}: read-only \
             commands see it in memory, and the next open for writing (put, write-at, del, \
             trees --create or --drop) applies it on disk."
        ),
        Change::Nothing(what) => {
            format!("closing {dir} failed: {close} ({what} changed nothing in it)")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn options_follow_the_arguments() {
        let db = DbArgs { dir: PathBuf::from("d"), pool_mib: 3, direct_io: false };
        let o = options(&db, Access::Existing);
        assert_eq!(o.pool_bytes, 3 << 20);
        assert!(!o.direct_io && !o.create_if_missing && !o.read_only);
        let o = options(&DbArgs { direct_io: true, ..db.clone() }, Access::Create);
        assert!(o.direct_io && o.create_if_missing);
        assert!(options(&db, Access::ReadOnly).read_only);
        assert_eq!(o.durability, Durability::Sync);
    }

    /// What `put` and `del` do, up to the call's return: the change is in the synced log
    /// then, so a crash before the clean close (a copy of the files taken at that moment)
    /// keeps it.
    #[test]
    fn a_put_or_del_is_durable_before_the_close() {
        let dir = tempfile::Builder::new().prefix("cli-durable").tempdir().unwrap();
        let db_args = DbArgs { dir: dir.path().join("db"), pool_mib: 1, direct_io: true };
        let db = open(&db_args, Access::Create).unwrap();
        let tree = db.tree("t").unwrap();
        tree.put(b"kept", b"value").unwrap();
        tree.put(b"removed", b"gone").unwrap();
        assert!(tree.delete(b"removed").unwrap());
        let image = dir.path().join("image");
        copy_files(&db_args.dir, &image);
        drop(tree);
        db.close().unwrap();
        let recovered = DbArgs { dir: image, ..db_args };
        let db = open(&recovered, Access::Existing).unwrap();
        assert!(db.recovery_report().records > 0, "{:?}", db.recovery_report());
        let tree = db.open_tree("t").unwrap();
        assert_eq!(tree.get(b"kept").unwrap().as_deref(), Some(&b"value"[..]));
        assert_eq!(tree.get(b"removed").unwrap(), None);
        assert!(db.check().unwrap().is_ok());
    }

    use ferrite::testing::copy_crash_image as copy_files;

    fn enospc() -> ferrite::Error {
        ferrite::Error::Io {
            context: "growing d/pages.ferrite to 67108864 bytes".into(),
            source: io::Error::from_raw_os_error(28),
        }
    }

    /// A failed close after a committed change: the operation's outcome (exit status 0, or
    /// 1 for a `del` of an absent key) and a warning that says the change is durable.
    #[test]
    fn a_failed_close_after_a_committed_change_is_a_warning() {
        let dir = Path::new("d");
        let mut stderr = Vec::new();
        let put = Ok((Outcome::Done, Change::Durable("the put".into())));
        let outcome = settle(dir, put, Err(enospc()), &mut stderr).unwrap();
        assert_eq!(outcome.exit_status(), 0);
        let warning = String::from_utf8(stderr).unwrap();
        assert!(
            warning.starts_with(
                "ferrite: warning: the put is durable (in the synced write-ahead log), but \
                 closing d then failed: I/O error while growing d/pages.ferrite to 67108864 \
                 bytes: No space left on device (os error 28). Every later open replays the log"
            ),
            "{warning}"
        );
        assert!(warning.contains("which applies the put:") && warning.ends_with(".\n"));
        assert_eq!(warning.lines().count(), 1, "{warning}");

        let mut stderr = Vec::new();
        let absent = Ok((Outcome::Absent, Change::Nothing("the del".into())));
        let outcome = settle(dir, absent, Err(enospc()), &mut stderr).unwrap();
        assert_eq!(outcome.exit_status(), 1);
        assert_eq!(
            String::from_utf8(stderr).unwrap(),
            "ferrite: warning: closing d failed: I/O error while growing d/pages.ferrite to \
             67108864 bytes: No space left on device (os error 28) (the del changed nothing in \
             it)\n"
        );

        // A read keeps its data: the value is returned for printing.
        let mut stderr = Vec::new();
        let get = Ok((Some(b"v".to_vec()), Change::Nothing("the get".into())));
        assert_eq!(
            settle(dir, get, Err(ferrite::Error::Closed), &mut stderr).unwrap().unwrap(),
            b"v"
        );
        assert!(!stderr.is_empty());

        // A clean close says nothing.
        let mut stderr = Vec::new();
        let put = Ok((Outcome::Done, Change::Durable("the put".into())));
        assert_eq!(settle(dir, put, Ok(()), &mut stderr).unwrap(), Outcome::Done);
        assert!(stderr.is_empty());
    }

    /// An operation that failed fails the command (exit status 2) whatever the close does;
    /// a failed close is added to its message.
    #[test]
    fn a_failed_operation_stays_an_error() {
        let dir = Path::new("d");
        let mut stderr = Vec::new();
        let failed: Result<(Outcome, Change), CliError> = Err(enospc().into());
        let e = settle(dir, failed, Ok(()), &mut stderr).unwrap_err();
        assert!(matches!(e, CliError::Engine(_)), "{e}");
        let failed: Result<(Outcome, Change), CliError> =
            Err(CliError::Engine(ferrite::Error::TreeNotFound { name: "t".into() }));
        let e = settle(dir, failed, Err(enospc()), &mut stderr).unwrap_err();
        assert_eq!(
            e.to_string(),
            "no tree named \"t\" (closing d afterwards failed too: I/O error while growing \
             d/pages.ferrite to 67108864 bytes: No space left on device (os error 28))"
        );
        assert!(stderr.is_empty());
        // A reader that went away stays quiet.
        let pipe: Result<(Outcome, Change), CliError> =
            Err(io::Error::from(io::ErrorKind::BrokenPipe).into());
        assert!(settle(dir, pipe, Err(enospc()), &mut stderr).unwrap_err().is_broken_pipe());
    }

    /// `operate_then_close` on a real directory: the operation's value, a clean close.
    #[test]
    fn operate_then_close_returns_the_operations_value() {
        let dir = tempfile::Builder::new().prefix("cli-operate").tempdir().unwrap();
        let db_args = DbArgs { dir: dir.path().join("db"), pool_mib: 1, direct_io: true };
        let db = open(&db_args, Access::Create).unwrap();
        let put = operate_then_close(db, &db_args.dir, |db| {
            db.tree("t")?.put(b"k", b"v")?;
            Ok((Outcome::Done, Change::Durable("the put".into())))
        });
        assert_eq!(put.unwrap(), Outcome::Done);
        let db = open(&db_args, Access::ReadOnly).unwrap();
        let value = operate_then_close(db, &db_args.dir, |db| {
            Ok((db.open_tree("t")?.get(b"k")?, Change::Nothing("the get".into())))
        });
        assert_eq!(value.unwrap().as_deref(), Some(&b"v"[..]));
        let db = open(&db_args, Access::ReadOnly).unwrap();
        let missing = operate_then_close(db, &db_args.dir, |db| {
            Ok((db.open_tree("nope")?.get(b"k")?, Change::Nothing("the get".into())))
        });
        assert!(matches!(missing, Err(CliError::Engine(ferrite::Error::TreeNotFound { .. }))));
    }

    #[test]
    fn exit_statuses() {
        assert_eq!(Outcome::Done.exit_status(), 0);
        assert_eq!(Outcome::Absent.exit_status(), 1);
        assert_eq!(Outcome::Faults.exit_status(), 1);
        let pipe = CliError::Output(io::Error::from(io::ErrorKind::BrokenPipe));
        assert!(pipe.is_broken_pipe());
        assert!(!CliError::Engine(ferrite::Error::Closed).is_broken_pipe());
        assert_eq!(CliError::Engine(ferrite::Error::Closed).to_string(), "the database is closed");
    }
}
