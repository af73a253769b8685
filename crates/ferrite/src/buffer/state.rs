//! The page-state word: one `AtomicU64` per page id, holding a latch state (high 8 bits)
//! and a version (low 56 bits).
//!
//! | state       | value     | meaning                                               |
//! |-------------|-----------|-------------------------------------------------------|
//! | `EVICTED`   | 0         | not in memory (the initial state: the array is zeroed)|
//! | `UNLOCKED`  | 1         | in memory, no latch; optimistic readers welcome       |
//! | shared      | 2..=250   | in memory, `state - 1` shared latches held            |
//! | `LOADING`   | 253       | being read from disk by whoever moved it from EVICTED;|
//! |             |           | readers treat it as a miss and wait for that read     |
//! | `MARKED`    | 254       | in memory, unlatched, chosen by the clock; any access |
//! |             |           | clears the mark (second chance)                       |
//! | `LOCKED`    | 255       | exclusively latched (writer, loader or evictor)       |
//!
//! Transitions (by compare-and-swap, or by a store from the latch holder; the state words
//! live in the page table, `page_table.rs`):
//! - `EVICTED -> LOADING -> UNLOCKED` (version + 1): `load` / `begin_load` + `finish_load`
//!   (`load.rs`), or `-> EVICTED` (version + 1) when the read fails;
//! - `EVICTED -> LOCKED`: `allocate` (`page_alloc.rs`; the page is formatted, then unlocked),
//!   and recovery's reads (`recovery.rs`);
//! - `UNLOCKED|MARKED -> LOCKED`: `lock_exclusive` (`guard.rs`); `LOCKED -> UNLOCKED` with
//!   version + 1 on release;
//! - `UNLOCKED|MARKED|shared -> shared + 1` and back: `lock_shared` / release (`guard.rs`);
//! - `UNLOCKED -> MARKED`: the clock (`evict.rs`); `MARKED -> UNLOCKED`: any reader;
//! - `MARKED -> LOCKED -> EVICTED` with version + 1: `evict_batch`, or `pick_victims` +
//!   `finish_evict_many` (`evict.rs`);
//! - `LOCKED -> MARKED` with version + 1: a worker's dirty victim, copied for its write and
//!   unlatched while the write is in flight (`write_back_start`); once written it goes
//!   `MARKED -> LOCKED -> EVICTED` if nothing touched it meanwhile (`finish_write_back`).
//!
//! Invariants: the version changes whenever the page's contents may have changed (every
//! exclusive release and every eviction), so an optimistic reader that sees the same version
//! before and after its copy has read a consistent page.

pub const EVICTED: u8 = 0;
pub const UNLOCKED: u8 = 1;
pub const SHARED_MIN: u8 = 2;
pub const SHARED_MAX: u8 = 250;
pub const LOADING: u8 = 253;
pub const MARKED: u8 = 254;
pub const LOCKED: u8 = 255;

const VERSION_MASK: u64 = (1 << 56) - 1;

/// A decoded page-state word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageState(pub u64);

impl PageState {
    /// The word of `state` and `version` (its low 56 bits).
    #[inline]
    pub fn new(state: u8, version: u64) -> Self {
        PageState(((state as u64) << 56) | (version & VERSION_MASK))
    }
    /// The latch state (see the table above).
    #[inline]
    pub fn state(self) -> u8 {
        (self.0 >> 56) as u8
    }
    /// The version.
    #[inline]
    pub fn version(self) -> u64 {
        self.0 & VERSION_MASK
    }
    /// Same version, another state.
    #[inline]
    pub fn with_state(self, state: u8) -> Self {
        PageState::new(state, self.version())
    }
    /// Next version, another state.
    #[inline]
    pub fn bumped(self, state: u8) -> Self {
        PageState::new(state, self.version() + 1)
    }
    /// Whether the page is in memory (or being read into it).
    #[inline]
    pub fn is_resident(self) -> bool {
        self.state() != EVICTED
    }
    /// Whether an optimistic reader may copy the page now.
    #[inline]
    pub fn readable(self) -> bool {
        matches!(self.state(), UNLOCKED | MARKED) || self.shared()
    }
    /// Whether shared latches are held.
    #[inline]
    pub fn shared(self) -> bool {
        (SHARED_MIN..=SHARED_MAX).contains(&self.state())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding() {
        let s = PageState::new(MARKED, 77);
        assert_eq!(s.state(), MARKED);
        assert_eq!(s.version(), 77);
        assert_eq!(s.bumped(LOCKED).version(), 78);
        assert_eq!(PageState(0).state(), EVICTED);
        assert!(PageState::new(3, 1).shared());
        assert!(!PageState::new(LOCKED, 1).readable());
    }
}
