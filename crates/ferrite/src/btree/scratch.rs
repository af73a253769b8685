//! Per-operation scratch memory: page copies for optimistic reads, a key buffer and a value
//! buffer (a value cut between its Value page and its leaf is joined there), reused
//! across operations on a thread so that the hot path allocates nothing.

use std::cell::RefCell;

use crate::io::AlignedPage;

/// Page copies an operation may hold at once: parent, node, sibling, merge output.
pub const SCRATCH_PAGES: usize = 4;

/// One thread's scratch memory (see the module documentation).
#[derive(Debug, Default)]
pub struct Scratch {
    /// Page copies (parent, node, sibling, merge output).
    pub pages: [AlignedPage; SCRATCH_PAGES],
    /// A split's separator, being built.
    pub key: Vec<u8>,
    /// A value joined from its Value page and its leaf.
    pub value: Vec<u8>,
}

thread_local! {
    static CACHED: RefCell<Option<Box<Scratch>>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's scratch (a fresh one when re-entered).
pub fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    let mut scratch = CACHED.with(|cell| cell.borrow_mut().take()).unwrap_or_default();
    let result = f(&mut scratch);
    CACHED.with(|cell| *cell.borrow_mut() = Some(scratch));
    result
}
