//! What the workloads draw: the seeded random generator, the key choosers (uniform, zipfian,
//! latest) and the lookup workload's keys and self-checking values.

pub mod keys;
pub mod rng;
pub mod zipf;

pub use rng::Rng;
