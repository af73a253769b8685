//! Workloads and measurement behind `ferrite bench`. The `ferrite` command only parses
//! arguments and prints what comes back.
//!
//! - `runner`: the one runner the key-value workloads run on (threads or Ferrite's tasks,
//!   closed or open loop), HdrHistogram for latency;
//! - `workloads`: Ferrite's lookup benchmark, the comparison workloads (YCSB, fills) on any
//!   store, `io` (the device's ceiling, fio beside it), `recovery`, `tpcc`, `compare`
//!   (suites) and the data directory they run in;
//! - `stores`: the stores behind `KvStore` (Ferrite, and the peers with feature `peers`);
//! - `gen`: what the workloads draw (the seeded generator, key choosers, self-checking values);
//! - `measure`: processor time, device counters, the memory cap, progress, run phases;
//! - `report`: the result line, its JSON, the summary formats and the comparison charts.

pub mod error;
pub mod gen;
pub mod measure;
pub mod report;
pub mod runner;
pub mod stores;
pub mod workloads;

pub use error::BenchError;

/// The commit this build was made from (`git rev-parse --short HEAD` when it was built,
/// with "with changes" if the code differed from it), or "unknown" outside a checkout.
pub const BUILD_COMMIT: &str = env!("FERRITE_BUILD_COMMIT");
pub use gen::Rng;
pub use measure::Progress;
pub use report::ResultLine;
pub use stores::{FerriteTree, IoCounters, KvStore, StoreError};
