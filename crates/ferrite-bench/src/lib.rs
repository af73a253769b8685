//! Workloads and measurement behind `ferrite bench`: key and value generation, loaders,
//! the lookup loop, a latency histogram, a seeded RNG, progress display and result lines.
//!
//! Each workload is a module (`lookup`, `io`, `recovery`, and the comparison workloads:
//! `ycsb` for the operation streams, `workload` for the runner, `workload_tasks` for
//! Ferrite's tasks, `compare` for suites, `chart` for their pictures); the stores they run
//! against sit behind `KvStore` (`store`). The `ferrite` command only parses arguments and prints what
//! comes back.

pub mod chart;
pub mod compare;
pub mod conformance;
pub mod cpu;
pub mod datadir;
pub mod diskstats;
pub mod error;
pub mod histogram;
pub mod io;
pub mod keys;
pub mod lookup;
pub mod lookup_tasks;
pub mod memcap;
#[cfg(feature = "peers")]
pub mod peers;
pub mod phase;
pub mod progress;
pub mod recovery;
pub mod report;
pub mod rng;
pub mod store;
pub mod workload;
pub mod workload_tasks;
pub mod ycsb;
pub mod zipf;

pub use error::BenchError;
pub use histogram::Histogram;
pub use progress::Progress;
pub use report::ResultLine;
pub use rng::Rng;
pub use store::{FerriteTree, IoCounters, KvStore, StoreError};
