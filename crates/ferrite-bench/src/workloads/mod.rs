//! The workloads behind `ferrite bench`, one module each, and the data directory they run in.

pub mod compare;
pub mod datadir;
pub mod io;
pub mod recovery;
