//! The workloads behind `ferrite bench`, one module each, and the data directory they run in.
//! Those that issue operations run on `crate::runner`: Ferrite's own lookup benchmark
//! (`lookup`), the comparison workloads on any store (`run`: one workload on one store, over
//! the operation streams of `ycsb`, fills included) and the fills' read-back (`fill`); and
//! fio-like I/O into large objects on Ferrite, files, RocksDB and SQLite (`objects`); and
//! TPC-C (`tpcc`), whose terminals run transactions as tasks of their own.

pub mod compare;
pub mod compare_serve;
pub mod compare_tpcc;
pub mod datadir;
pub mod fill;
pub mod io;
pub mod lookup;
pub mod objects;
pub mod recovery;
pub mod run;
pub mod serve;
pub mod tpcc;
pub mod ycsb;
