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
        CpuTime::used_by(libc::RUSAGE_SELF)
    }

    /// The time the calling thread has used so far.
    pub fn this_thread() -> CpuTime {
        CpuTime::used_by(libc::RUSAGE_THREAD)
    }

    /// `getrusage(who)`'s user and system time.
    fn used_by(who: libc::c_int) -> CpuTime {
        // SAFETY: `rusage` is plain data, zero is a valid value for it, and getrusage only
        // writes into the struct we pass.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: RUSAGE_SELF or RUSAGE_THREAD, with a valid pointer to a rusage struct.
        let rc = unsafe { libc::getrusage(who, &mut usage) };
        assert_eq!(rc, 0, "getrusage({who}) failed");
        let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        CpuTime { user_s: seconds(usage.ru_utime), system_s: seconds(usage.ru_stime) }
    }

    /// The time another process has used so far, from `/proc/PID/stat` (in clock ticks);
    /// `None` if it cannot be read.
    pub fn of_process(pid: u32) -> Option<CpuTime> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name (field 2) is in parentheses and may hold spaces: count after it.
        let rest = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
        let (user, system): (f64, f64) =
            (fields.get(11)?.parse().ok()?, fields.get(12)?.parse().ok()?);
        // SAFETY: sysconf only reads a system constant.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        (ticks > 0.0).then(|| CpuTime { user_s: user / ticks, system_s: system / ticks })
    }

    pub fn plus(self, other: CpuTime) -> CpuTime {
        CpuTime { user_s: self.user_s + other.user_s, system_s: self.system_s + other.system_s }
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
        // This thread did the work, and the process's own stat file counts it too.
        let thread = CpuTime::this_thread();
        assert!(thread.total_s() > 0.0 && thread.total_s() <= CpuTime::now().total_s() + 0.01);
        let mine = CpuTime::of_process(std::process::id()).expect("our own /proc stat");
        assert!(mine.total_s() <= CpuTime::now().total_s() + 0.02, "{mine:?}");
        assert!(CpuTime::of_process(u32::MAX).is_none());
    }
}
