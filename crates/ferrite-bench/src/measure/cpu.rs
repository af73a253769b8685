//! Processor time used by this process (all threads), to report CPU cost per operation.

#![allow(unsafe_code)]

/// User and system processor time, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTime {
    pub user_s: f64,
    pub system_s: f64,
}

impl CpuTime {
    /// The time this process has used so far.
    pub fn now() -> CpuTime {
        // SAFETY: `rusage` is plain data, zero is a valid value for it, and getrusage only
        // writes into the struct we pass.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: RUSAGE_SELF with a valid pointer to a rusage struct.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
        assert_eq!(rc, 0, "getrusage(RUSAGE_SELF) failed");
        let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        CpuTime { user_s: seconds(usage.ru_utime), system_s: seconds(usage.ru_stime) }
    }

    /// Time used between `earlier` and `self`.
    pub fn since(self, earlier: CpuTime) -> CpuTime {
        CpuTime { user_s: self.user_s - earlier.user_s, system_s: self.system_s - earlier.system_s }
    }

    pub fn total_s(&self) -> f64 {
        self.user_s + self.system_s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_moves_forward_with_work() {
        // The kernel may account in ticks: work until the count moves (a few ms), at most 5 s.
        let start = CpuTime::now();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut x = 0u64;
        let mut used = CpuTime::default();
        while used.total_s() == 0.0 && std::time::Instant::now() < deadline {
            for i in 0..1_000_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
            std::hint::black_box(x);
            used = CpuTime::now().since(start);
        }
        assert!(used.total_s() > 0.0 && used.user_s >= 0.0 && used.system_s >= 0.0, "{used:?}");
    }
}
