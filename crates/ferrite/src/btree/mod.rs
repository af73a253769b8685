//! The B+tree: node layout (`node`), restartable operations (`tree`), range scans (`iter`),
//! the structural checker (`check`), and the blocking driver that runs attempts to the end.

pub mod buffered;
pub mod check;
pub mod iter;
pub mod node;
pub mod probe;
pub mod scratch;
pub mod tree;

use crate::buffer::{Attempt, BufferPool, Interrupt};
use crate::error::{PageId, Result};
pub use scratch::{with_scratch, Scratch};
pub use tree::BTree;

/// Runs `attempt` until it finishes, loading missing pages with blocking reads and backing
/// off on restarts. This is the direct (blocking) API's driver; the task scheduler has its own.
pub fn run<T>(pool: &BufferPool, mut attempt: impl FnMut(&mut Scratch) -> Attempt<T>) -> Result<T> {
    with_scratch(|scratch| {
        let mut restarts = 0u32;
        let mut failed_load: Option<PageId> = None;
        loop {
            match attempt(scratch) {
                Ok(value) => return Ok(value),
                Err(Interrupt::Error(e)) => return Err(e),
                Err(Interrupt::Miss(page_id)) => {
                    if let Err(e) = pool.load(page_id) {
                        // A page can be freed between the parent's validation and the load;
                        // a page that fails twice in a row is really broken.
                        if failed_load == Some(page_id) {
                            return Err(e);
                        }
                        failed_load = Some(page_id);
                    } else {
                        failed_load = None;
                    }
                }
                Err(Interrupt::Restart) => {
                    restarts += 1;
                    back_off(restarts);
                }
            }
        }
    })
}

/// Spins briefly, then yields the thread: whoever holds the latch needs the core.
pub fn back_off(restarts: u32) {
    if restarts < 8 {
        for _ in 0..(1 << restarts) {
            std::hint::spin_loop();
        }
    } else {
        std::thread::yield_now();
    }
}
