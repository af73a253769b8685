//! TPC-C (the Transaction Processing Performance Council's benchmark C, revision 5.11):
//! nine tables and two secondary indexes as trees, the five transactions over any store
//! with transactions, the consistency conditions, and the run on Ferrite, RocksDB or
//! WiredTiger.
//!
//! - `schema`: the tables' keys and rows, and the scale of a data set;
//! - `random`: NURand and the specification's generators;
//! - `store`: what a store must offer (`TpccStore`, `TpccTxn`), and Ferrite behind it;
//! - `model`: the in-memory reference store;
//! - `load`: the initial database;
//! - `txns`: the five transactions and the terminal's draws;
//! - `check`: the consistency conditions;
//! - `engine`: what a run needs of a store beyond the traits (terminals, counters), and
//!   Ferrite's;
//! - `peer`: RocksDB and WiredTiger as stores and engines (feature `peers`);
//! - `run`: `ferrite bench tpcc` (the data directory, terminals, measurement);
//! - `report`: what a run reports (summary, result line).

pub mod check;
pub mod engine;
pub mod load;
pub mod model;
#[cfg(feature = "peers")]
pub mod peer;
pub mod random;
pub mod report;
pub mod run;
pub mod schema;
pub mod store;
pub mod txns;

#[cfg(test)]
mod tests;

pub use report::TpccReport;
pub use run::{check_kept, run, KeptCheck, TpccConfig};
