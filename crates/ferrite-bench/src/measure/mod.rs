//! What a run measures besides its own counts, and how it keeps time: processor time, device
//! counters, the memory cap, the disk's cap, the progress display and the phases of a timed run.

pub mod cpu;
pub mod diskcap;
pub mod diskstats;
pub mod memcap;
pub mod phase;
pub mod progress;

pub use progress::Progress;
