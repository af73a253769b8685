//! Why a benchmark run failed.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::gen::keys::ValueMismatch;
use crate::stores::StoreError;

/// Everything that stops a benchmark. A failed run prints no result line.
#[derive(Debug)]
pub enum BenchError {
    /// The engine refused (opening, creating trees, ...).
    Engine(ferrite::Error),
    /// A store operation of the workload failed.
    Store(StoreError),
    /// A lookup returned a wrong value or none: the run is void.
    Verify { key: u64, mismatch: ValueMismatch },
    /// An object read returned bytes other than those written there (`bench objects`): what
    /// and where, in words. The run is void.
    Content(String),
    /// Preparing or removing the data directory failed.
    Io { context: String, source: io::Error },
    /// The data directory holds data that is not the benchmark's.
    NotBenchData { path: PathBuf, trees: Vec<String> },
    /// A parameter is out of range.
    Config(String),
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BenchError::Engine(e) => write!(f, "{e}"),
            BenchError::Store(e) => write!(f, "{e}"),
            BenchError::Verify { key, mismatch } => {
                write!(f, "verification failed: lookup of key {key}: {mismatch}")
            }
            BenchError::Content(what) => write!(f, "verification failed: {what}"),
            BenchError::Io { context, source } => write!(f, "{context}: {source}"),
            BenchError::NotBenchData { path, trees } => write!(
                f,
                "{} holds trees that are not the benchmark's ({}); point --db at a directory \
                 of its own",
                path.display(),
                trees.join(", ")
            ),
            BenchError::Config(reason) => write!(f, "{reason}"),
        }
    }
}

impl std::error::Error for BenchError {}

impl From<ferrite::Error> for BenchError {
    fn from(error: ferrite::Error) -> Self {
        BenchError::Engine(error)
    }
}
