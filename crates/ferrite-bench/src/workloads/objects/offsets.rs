//! Where each operation of `bench objects` goes: an object and a block-aligned offset in it.
//!
//! The objects, laid end to end, are cut into *units* of `max(block, 4 KiB)`; thread `t` of
//! `D` owns the units it is handed here and touches no other, so that no two threads ever
//! write the same bytes at once. That keeps what a store holds checkable (the last writer of a
//! block is known), and keeps RocksDB's read-modify-write of a 4 KiB chunk (a 2 KiB write)
//! from losing a neighbour's write. Over all threads the offsets are what fio draws:
//!
//! - random patterns: thread `t` owns the units `t, t + D, t + 2D, ...` and draws one of them
//!   uniformly for each operation (then one block of it, for 2 KiB blocks): every block of
//!   every object is equally likely;
//! - sequential patterns: thread `t` owns the `t`-th of `D` equal runs of units and walks it
//!   block after block, from its start, wrapping at its end (its own sequential cursor; with
//!   more threads than objects several walk different parts of one object, as fio's
//!   `offset_increment` would).

use crate::gen::rng::Rng;

/// The smallest unit a thread owns: RocksDB's chunk.
pub const UNIT_MIN_BYTES: u64 = 4096;

/// The objects and the block size of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub objects: u32,
    pub object_bytes: u64,
    pub block_bytes: u64,
}

impl Layout {
    /// Bytes of every object together.
    pub fn total_bytes(&self) -> u64 {
        u64::from(self.objects) * self.object_bytes
    }

    /// Bytes a thread owns at a time: a block, or 4 KiB for smaller blocks.
    pub fn unit_bytes(&self) -> u64 {
        self.block_bytes.max(UNIT_MIN_BYTES)
    }

    /// Units of every object together.
    pub fn units(&self) -> u64 {
        self.total_bytes() / self.unit_bytes()
    }

    fn blocks_per_unit(&self) -> u64 {
        self.unit_bytes() / self.block_bytes
    }

    /// Whether `threads` threads can each own at least one unit and units tile the objects.
    pub fn fits(&self, threads: u64) -> bool {
        self.object_bytes % self.unit_bytes() == 0 && self.units() >= threads
    }

    /// The object and offset of block `block` of the objects laid end to end.
    pub fn place(&self, block: u64) -> (u32, u64) {
        let byte = block * self.block_bytes;
        ((byte / self.object_bytes) as u32, byte % self.object_bytes)
    }
}

/// One thread's offsets.
#[derive(Debug, Clone)]
pub struct Cursor {
    layout: Layout,
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    /// Units `first, first + step, ...`, `count` of them, drawn uniformly.
    Random { rng: Rng, first: u64, step: u64, count: u64 },
    /// Blocks `start..end`, walked in order from `next`.
    Sequential { next: u64, start: u64, end: u64 },
}

impl Cursor {
    /// Thread `thread` of `threads` (`layout.fits(threads)`), drawing from `rng` if `random`.
    pub fn new(layout: Layout, random: bool, thread: u64, threads: u64, rng: Rng) -> Cursor {
        assert!(layout.fits(threads) && thread < threads, "{layout:?} for {threads} threads");
        let units = layout.units();
        let kind = if random {
            Kind::Random {
                rng,
                first: thread,
                step: threads,
                count: (units - thread).div_ceil(threads),
            }
        } else {
            let per_unit = layout.blocks_per_unit();
            let start = units * thread / threads * per_unit;
            let end = units * (thread + 1) / threads * per_unit;
            Kind::Sequential { next: start, start, end }
        };
        Cursor { layout, kind }
    }

    /// The next block: its object and offset.
    pub fn next_block(&mut self) -> (u32, u64) {
        let block = match &mut self.kind {
            Kind::Random { rng, first, step, count } => {
                let unit = *first + *step * rng.below(*count);
                let per_unit = self.layout.blocks_per_unit();
                let within = if per_unit > 1 { rng.below(per_unit) } else { 0 };
                unit * per_unit + within
            }
            Kind::Sequential { next, start, end } => {
                let block = *next;
                *next = if block + 1 == *end { *start } else { block + 1 };
                block
            }
        };
        self.layout.place(block)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    const MIB: u64 = 1 << 20;

    fn layout(objects: u32, object_bytes: u64, block_bytes: u64) -> Layout {
        Layout { objects, object_bytes, block_bytes }
    }

    #[test]
    fn blocks_tile_the_objects_end_to_end() {
        let l = layout(3, MIB, 2048);
        assert_eq!((l.total_bytes(), l.unit_bytes(), l.units()), (3 * MIB, 4096, 768));
        assert_eq!(l.place(0), (0, 0));
        assert_eq!(l.place(511), (0, MIB - 2048));
        assert_eq!(l.place(512), (1, 0));
        assert!(l.fits(768) && !l.fits(769));
        let big = layout(2, MIB, 256 << 10);
        assert_eq!((big.unit_bytes(), big.units()), (256 << 10, 8));
        assert!(big.fits(8) && !big.fits(9));
    }

    /// Threads never share a unit, and together they reach every block.
    #[test]
    fn threads_own_disjoint_units_that_cover_every_block() {
        for random in [false, true] {
            for block in [2048, 4096, 65536] {
                let l = layout(2, MIB, block);
                let threads = 5;
                let mut owner = std::collections::HashMap::new();
                let mut seen = HashSet::new();
                for t in 0..threads {
                    let mut c = Cursor::new(l, random, t, threads, Rng::stream(1, t));
                    for _ in 0..20_000 {
                        let (object, offset) = c.next_block();
                        assert!(object < 2 && offset % block == 0 && offset < MIB);
                        let unit = (u64::from(object) * MIB + offset) / l.unit_bytes();
                        assert_eq!(*owner.entry(unit).or_insert(t), t, "unit {unit} shared");
                        seen.insert((object, offset));
                    }
                }
                assert_eq!(seen.len() as u64, 2 * MIB / block, "random {random} block {block}");
            }
        }
    }

    #[test]
    fn sequential_cursors_walk_their_run_in_order_and_wrap() {
        let l = layout(2, MIB, 4096);
        let mut c = Cursor::new(l, false, 1, 2, Rng::new(0));
        let walk: Vec<(u32, u64)> = (0..257).map(|_| c.next_block()).collect();
        assert_eq!(walk[0], (1, 0), "thread 1 of 2 starts at the second half");
        assert_eq!(walk[1], (1, 4096));
        assert_eq!(walk[255], (1, MIB - 4096));
        assert_eq!(walk[256], (1, 0), "and wraps at its end");
    }
}
