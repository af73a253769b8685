//! Workloads and measurement behind `ferrite bench`: key and value generation, loaders,
//! the lookup loop, a latency histogram, a seeded RNG, progress display and result lines.
//!
//! Each workload is a module (`lookup`); the stores it runs against sit behind `KvStore`
//! (`store`). The `ferrite` command only parses arguments and prints what comes back.

pub mod chart;
pub mod cpu;
pub mod datadir;
pub mod error;
pub mod histogram;
pub mod io;
pub mod keys;
pub mod lookup;
pub mod lookup_tasks;
pub mod phase;
pub mod progress;
pub mod report;
pub mod rng;
pub mod store;

pub use error::BenchError;
pub use histogram::Histogram;
pub use progress::Progress;
pub use report::ResultLine;
pub use rng::Rng;
pub use store::{FerriteTree, IoCounters, KvStore, StoreError};
