//! Shared helpers for the engine's integration tests.

#![allow(dead_code)]

pub mod child;
pub mod ext4;

use std::sync::Arc;

use ferrite::io::SimDisk;
use ferrite::{Db, Durability, Options};

pub use ferrite::test_util::TempDir;

/// Options for a pool of `pool_pages` pages and a small address space, so that tests evict
/// and re-read pages all the time.
pub fn tiny(pool_pages: u64) -> Options {
    Options {
        pool_bytes: pool_pages * 4096,
        max_size_bytes: 1 << 30,
        grow_chunk_bytes: 1 << 20,
        ..Options::default()
    }
}

/// A small deterministic generator (splitmix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
}

/// The seeds a randomized test runs: `FERRITE_SEED` replays one, otherwise `count` fixed ones.
pub fn seeds(count: u64) -> Vec<u64> {
    match std::env::var("FERRITE_SEED") {
        Ok(seed) => vec![seed.parse().expect("FERRITE_SEED must be an integer")],
        Err(_) => (1..=count).collect(),
    }
}

/// Runs `ferrite check`'s walk and fails the test on any fault.
pub fn assert_check(db: &Db) {
    let report = db.check().expect("check ran");
    let faults = report.all_faults();
    assert!(faults.is_empty(), "check found faults:\n{}", faults.join("\n"));
}

#[allow(unused_imports)] // not every test binary recovers crash images
pub use ferrite::test_util::copy_crash_image as copy_dir;

/// Options for a database on simulated disk `disk`: a small pool (smaller than the crash
/// suite's trees, so that leaves are evicted), no workers, `Sync`
/// durability, 1 MiB log segments, and checkpoints only when the test takes them (a
/// checkpoint thread would make the run depend on timing).
pub fn sim_options(disk: &Arc<SimDisk>) -> Options {
    Options {
        pool_bytes: 32 * 4096,
        max_size_bytes: 64 << 20,
        grow_chunk_bytes: 64 << 10,
        direct_io: false,
        workers: 0,
        durability: Durability::Sync,
        log_segment_bytes: 1 << 20,
        checkpoint_log_bytes: 1 << 40,
        // A small change buffer, so that puts into leaves not in memory wait there and
        // drains come often.
        change_buffer_bytes: Some(4 << 10),
        storage: Some(disk.clone()),
        ..Options::default()
    }
}
