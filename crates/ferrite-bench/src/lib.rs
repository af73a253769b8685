//! Workloads and measurement behind `ferrite bench`. The `ferrite` command only parses
//! arguments and prints what comes back.
//!
//! - `gen`: what the workloads draw (the seeded generator, key choosers, self-checking values);
//! - `measure`: processor time, device counters, the memory cap, progress, run phases;
//! - `report`: the result line, its JSON, the summary formats and the comparison charts;
//! - `workloads`: `io`, `recovery`, `compare` and the data directory;
//! - `ycsb` (the operation streams), `workload` (the runner), `workload_tasks` (Ferrite's
//!   tasks), `lookup`, and the stores behind `KvStore` (`store`).

pub mod conformance;
pub mod error;
pub mod gen;
pub mod histogram;
pub mod lookup;
pub mod lookup_tasks;
pub mod measure;
#[cfg(feature = "peers")]
pub mod peers;
pub mod report;
pub mod store;
pub mod workload;
pub mod workload_tasks;
pub mod workloads;
pub mod ycsb;

// The modules' paths before they moved into folders, for the code that still uses them.
pub use gen::{keys, rng, zipf};
pub use measure::{cpu, diskstats, memcap, phase, progress};
pub use report::chart;
pub use workloads::{compare, datadir, io, recovery};

pub use error::BenchError;
pub use gen::Rng;
pub use histogram::Histogram;
pub use measure::Progress;
pub use report::ResultLine;
pub use store::{FerriteTree, IoCounters, KvStore, StoreError};
