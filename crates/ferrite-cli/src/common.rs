//! What every command shares: opening the data directory with the right options, the
//! outcome of a command and its exit status, and the errors a command can end with.

use std::fmt;
use std::io;

use ferrite::{Db, Durability, Options};
use ferrite_bench::BenchError;

use crate::args::DbArgs;

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
}

impl CliError {
    /// A reader that went away (`ferrite scan | head`) is not an error worth a message.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, CliError::Output(e) if e.kind() == io::ErrorKind::BrokenPipe)
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Engine(e) => write!(f, "{e}"),
            CliError::Bench(e) => write!(f, "bench: {e}"),
            CliError::Output(e) => write!(f, "writing the output failed: {e}"),
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
    /// Create the directory and its files if they do not exist (`put`, `trees --create`).
    Create,
    /// The directory must be a Ferrite data directory already; anything else is an error.
    Existing,
    /// As `Existing`, and nothing on disk changes (`get`, `scan`, `trees`, `stats`, `check`).
    ReadOnly,
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
        let dir = ferrite::test_util::TempDir::new("cli-durable");
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

    use ferrite::test_util::copy_crash_image as copy_files;

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
