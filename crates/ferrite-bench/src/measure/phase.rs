//! The phases of a measured run (warm-up, measuring, stop), shared by the benchmark threads or
//! tasks and the controller that times them.

use std::sync::atomic::{AtomicU8, Ordering};
use std::thread;
use std::time::{Duration, Instant};

pub const WARMUP: u8 = 0;
pub const MEASURE: u8 = 1;
pub const STOP: u8 = 2;

/// Sets the phase to `STOP` when dropped: a worker that ends for any reason, a panic
/// included, stops the others and wakes the controller.
#[derive(Debug)]
pub struct StopOnDrop<'a>(pub &'a AtomicU8);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(STOP, Ordering::Release);
    }
}

/// Sleeps for `duration`, or less if the phase becomes `STOP`.
pub fn wait(phase: &AtomicU8, duration: Duration) {
    let deadline = Instant::now() + duration;
    while phase.load(Ordering::Acquire) != STOP {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        thread::sleep(left.min(Duration::from_millis(20)));
    }
}
