//! Workloads and measurement behind `ferrite bench`: key and value generation, loaders, one
//! runner for every workload, seeded random numbers, progress display and result lines.
//!
//! `runner` issues the operations (threads or Ferrite's tasks, closed or open loop); the
//! workloads that run on it are in `workloads` (Ferrite's lookup benchmark, the comparison
//! workloads: YCSB and the fills); the stores they run against sit behind `KvStore`
//! (`stores`). `io`, `recovery` and `compare` are workloads of their own. The `ferrite`
//! command only parses arguments and prints what comes back.

pub mod chart;
pub mod compare;
pub mod cpu;
pub mod datadir;
pub mod diskstats;
pub mod error;
pub mod io;
pub mod keys;
pub mod memcap;
pub mod phase;
pub mod progress;
pub mod recovery;
pub mod report;
pub mod rng;
pub mod runner;
pub mod stores;
pub mod workloads;
pub mod zipf;

pub use error::BenchError;
pub use progress::Progress;
pub use report::ResultLine;
pub use rng::Rng;
pub use stores::{FerriteTree, IoCounters, KvStore, StoreError};
pub use workloads::{lookup, ycsb};

/// The comparison runner's earlier path (`workloads::run`, with `stores` and `fill`).
pub mod workload {
    pub use crate::stores::{open_store, OpenStore, StoreKind};
    pub use crate::workloads::fill::{compare_fill, verify_fill, FillCheck};
    pub use crate::workloads::run::*;
    pub use crate::workloads::ycsb::{verify, OpCounts};
}

/// Ferrite's task runs' earlier path.
pub mod workload_tasks {
    pub use crate::stores::ferrite::{ferrite_options, open_ferrite, FerriteStore};
    pub use crate::workloads::ycsb::start_tasks;
}

/// The stores' earlier path.
pub mod store {
    pub use crate::stores::*;
}

/// The latency histogram's earlier path: HdrHistogram behind the old interface.
pub mod histogram {
    pub use crate::runner::Histogram;
}
