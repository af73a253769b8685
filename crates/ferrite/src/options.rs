//! Everything `Db::open` can be told, with limits checked at open.

use crate::error::{Error, Result};
use crate::format::page::PAGE_SIZE;
use crate::io::EngineKind;

/// Smallest pool accepted: a few latched pages per thread must always fit.
pub const MIN_POOL_PAGES: u64 = 16;
/// Largest pool accepted: frames are numbered with 32 bits (16 TiB of 4 KiB frames).
pub const MAX_POOL_PAGES: u64 = u32::MAX as u64;
/// The largest change buffer: every checkpoint record lists all of it, and a record must stay
/// below `wal::record::MAX_RECORD_BYTES` (an entry is logged in fewer bytes than it counts).
pub const MAX_CHANGE_BUFFER_BYTES: u64 = 128 << 20;

/// How to open a data directory.
#[derive(Debug, Clone)]
pub struct Options {
    /// Memory for cached pages, in bytes (rounded down to whole pages). Data may be far larger.
    pub pool_bytes: u64,
    /// Largest the page file may grow, in bytes: Ferrite reserves this much virtual address
    /// space (not memory) at open, one slot per page.
    pub max_size_bytes: u64,
    /// The page file grows by this many bytes at a time, preallocated with `fallocate`.
    pub grow_chunk_bytes: u64,
    /// Read and write pages with `O_DIRECT`, bypassing the kernel's page cache.
    pub direct_io: bool,
    /// Create the data directory and its files when they do not exist.
    pub create_if_missing: bool,
    /// Change nothing on disk: writes fail with `Error::ReadOnly`. A directory that was not
    /// closed cleanly is recovered in memory: its log is replayed into the pool (which grows
    /// by the pages the log changed since the last checkpoint) and never written. Read-only
    /// opens share the directory with each other, never with a writer, and work on
    /// read-only media.
    pub read_only: bool,
    /// How long an open waits for the directory while another `Db` holds it in a way this
    /// open cannot share, before failing with `Error::Locked` (zero: fail at once).
    pub lock_wait: std::time::Duration,
    /// The longest a transaction's read for update (`Transaction::get_for_update`) waits
    /// for an earlier transaction that read the same key for update to end, before it
    /// reads on (default 100 ms). Such waits only save work: a transaction that reads on
    /// may conflict at its commit, never commit what it should not.
    pub update_wait: std::time::Duration,
    /// Worker threads that run tasks (`Db::spawn`, the `*_async` calls of `Tree`); each owns
    /// an I/O engine. The default is one per core (`std::thread::available_parallelism`).
    /// 0 starts none: the blocking API works without them, and a short-lived process that
    /// only uses it (a command-line tool) saves their start-up.
    pub workers: usize,
    /// How long a worker with nothing to run and no page read in flight polls for work
    /// handed to it (a task another worker woke, a new task) and for its own completions
    /// before it sleeps; default 50 µs. Waking a sleeping worker costs the waker a system
    /// call and the woken work a trip through the kernel's scheduler; the poll catches the
    /// hand-offs that come soon, as a commit lock's release by the other worker does.
    /// A poll that catches nothing halves the next (down to none), and a hand-off that
    /// comes within this long of the worker running out of work makes it whole again, so a
    /// worker whose work comes far apart stops spending CPU on polls. Zero never polls.
    pub idle_spin: std::time::Duration,
    /// How the workers issue I/O. `None` (the default) takes the best engine the kernel
    /// allows: io_uring, else Linux AIO (where io_uring is refused: a kernel without it,
    /// `kernel.io_uring_disabled`, or a container's seccomp profile, as Docker 25+ and
    /// containerd 2.0 have by default), else blocking psync; a fallback is logged as a
    /// warning (through `log`) with what it costs, and [`crate::Db::engine`] says which was
    /// chosen. `Some(kind)` is that engine or an error saying why the kernel refused it.
    pub engine: Option<EngineKind>,
    /// If an explicitly chosen `engine` cannot be opened, use this one instead; `None` (the
    /// default) makes that an error.
    pub engine_fallback: Option<EngineKind>,
    /// I/O requests each worker keeps in flight at most.
    pub io_depth: usize,
    /// Files or block devices to stripe the pages over (RAID0 by Ferrite), in order; empty:
    /// the single `pages.ferrite` of the data directory. A data directory remembers its list
    /// and must be reopened with the same one.
    pub devices: Vec<std::path::PathBuf>,
    /// Bytes per stripe chunk across `devices` (a multiple of 4 KiB).
    pub stripe_chunk_bytes: u64,
    /// When a write is durable, for writes that do not say (a [`crate::WriteBatch`] may):
    /// see [`Durability`]. The default is `Sync`: acknowledged means durable.
    pub durability: Durability,
    /// Bytes per log segment file (`wal/*.log`); segments are reused once a checkpoint no
    /// longer needs them.
    pub log_segment_bytes: u64,
    /// A checkpoint starts once this many bytes were logged since the last one: it bounds
    /// both the log on disk and the work recovery replays. `None` (the default): the larger
    /// of the pool's size and twice the data's (the pages in the file, as it grows), at
    /// least 256 MiB and at most 1 GiB ([`Options::checkpoint_interval_for`]). A checkpoint
    /// writes back every dirty page, up to the whole pool, and a page's first write-back
    /// after it logs the whole page (against torn writes): an interval much shorter than the
    /// pool writes the same hot pages back, and logs their images, again and again (TPC-C in
    /// a 1 GiB pool: 12–18 % more transactions per second at 1 GiB than at 256 MiB); and
    /// one shorter than the data, when the pool is smaller than it, logs an image of nearly
    /// every page it writes back (TPC-C at 10x a 40 MiB pool: 0.95 images a transaction,
    /// half the log, at 256 MiB; 0.18 at 1 GiB, 7–11 % less CPU per transaction;
    /// docs/benchmarks.md). Each page logs at most one image an interval, so at twice the
    /// data's size the images are at most half of what is logged.
    pub checkpoint_log_bytes: Option<u64>,
    /// Memory of `pool_bytes` for the change buffer (`change_buffer/`): puts into leaves that
    /// are not in memory wait there, instead of reading their leaf, until it is read anyway.
    /// `None` (the default): a quarter of `pool_bytes` (at most 128 MiB) for pools of 16 MiB
    /// or more, none below. `Some(0)` turns it off. The buffer borrows this much of the
    /// pool's frames only once puts need it (the frames' memory is given back to the system
    /// meanwhile), and keeps them until the database is closed; until then they hold pages.
    /// Transactions' puts fill a sixteenth of it at most ([`Options::transaction_buffer_bytes`]),
    /// and borrow the frames for that much only. A read-only open has none (nothing is put).
    pub change_buffer_bytes: Option<u64>,
    /// Pages recovery reads ahead at once, many reads in flight, for the log records it is
    /// about to replay (at most a quarter of the pool); 0 reads each page when its record
    /// needs it. Real files only: a simulated disk always reads one at a time.
    pub recovery_read_ahead_pages: u64,
    /// Bytes of object fragments (small or unaligned writes into objects, held in the
    /// objects tree until merged into whole blocks) the database aims to keep: an object's
    /// fragments are merged once they cover more blocks than a threshold that falls from
    /// 64 blocks to 1 as the fragments in all objects approach this.
    pub object_fragment_bytes: u64,
    /// Bytes per second the background merge of fragments may rewrite (0: no background
    /// merge; a block whose fragments outgrow their entry is still merged by its writer).
    pub object_merge_bytes_per_sec: u64,
    /// Memory for snapshots ([`Db::snapshot`](crate::Db::snapshot)): copies of the pages that
    /// commits change while a snapshot taken before them may still read them. A commit that
    /// would keep more ends the oldest snapshots, whose reads then fail with
    /// [`Error::SnapshotTooOld`](crate::Error::SnapshotTooOld). Nothing is kept while no
    /// snapshot lives.
    pub snapshot_bytes: u64,
    /// A second cache tier between the pool and the disk (`None`, the default: none): pages
    /// evicted from the pool are kept there in their on-disk form, and a miss of the pool
    /// looks there before the disk. A file on a faster medium than the data (mapped: a file
    /// in `/dev/shm`, CXL memory as a DAX file; block: a faster SSD, read and written
    /// through the workers' rings), emptied at every open: it is only a cache.
    /// See [`TierOptions`](crate::TierOptions).
    pub tier: Option<crate::buffer::TierOptions>,
    /// Where the data directory's files live; `None` (the default) is the real directory.
    /// Tests put a simulated disk here (`ferrite::testing::SimDisk`) to crash, tear and fail writes.
    #[doc(hidden)]
    pub storage: Option<std::sync::Arc<dyn crate::io::Storage>>,
}

/// When a change counts as durable: what a crash may still lose once the call returned.
/// [`Db::flush`](crate::Db::flush) makes every commit made so far durable whatever its
/// durability: `None` or `Periodic` commits with a flush where it matters (at the end of a
/// load, say) make one write and one sync of the log for all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// The log is on disk (written and `fdatasync`ed) before the call returns; commits that
    /// wait together share one log write and one sync (group commit).
    Sync,
    /// The call returns at once; the log is written and synced within this interval. A
    /// crash loses at most the changes of the last interval, never half a batch.
    Periodic(std::time::Duration),
    /// The call returns at once; the workers (if any) write the log in the background once
    /// about a megabyte of it is pending (a commit waits when four are), and checkpoints,
    /// close and `Db::flush` write it too; a crash may lose any changes not yet written, never
    /// half a batch.
    None,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            pool_bytes: 256 << 20,
            max_size_bytes: 1 << 40,
            grow_chunk_bytes: 64 << 20,
            direct_io: true,
            create_if_missing: true,
            read_only: false,
            lock_wait: std::time::Duration::ZERO,
            update_wait: std::time::Duration::from_millis(100),
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            idle_spin: std::time::Duration::from_micros(50),
            engine: None,
            engine_fallback: None,
            io_depth: 128,
            devices: Vec::new(),
            stripe_chunk_bytes: crate::io::DEFAULT_CHUNK_BYTES,
            durability: Durability::Sync,
            log_segment_bytes: 64 << 20,
            checkpoint_log_bytes: None,
            change_buffer_bytes: None,
            recovery_read_ahead_pages: 4096,
            object_fragment_bytes: 64 << 20,
            object_merge_bytes_per_sec: 256 << 20,
            snapshot_bytes: 64 << 20,
            tier: None,
            storage: None,
        }
    }
}

/// The least checkpoint interval by default (`Options::checkpoint_log_bytes`: `None`).
pub const MIN_AUTO_CHECKPOINT_BYTES: u64 = 256 << 20;
/// The greatest checkpoint interval by default: recovery replays up to about this much
/// (about 13 s per GiB on this project's test machine, docs/benchmarks.md).
pub const MAX_AUTO_CHECKPOINT_BYTES: u64 = 1 << 30;

/// The default checkpoint interval (`Options::checkpoint_log_bytes`: `None`) for a pool of
/// `pool_bytes` and `data_bytes` of pages: the larger of the pool and twice the data,
/// between [`MIN_AUTO_CHECKPOINT_BYTES`] and [`MAX_AUTO_CHECKPOINT_BYTES`].
pub fn auto_checkpoint_interval(pool_bytes: u64, data_bytes: u64) -> u64 {
    let wanted = pool_bytes.max(data_bytes.saturating_mul(2));
    wanted.clamp(MIN_AUTO_CHECKPOINT_BYTES, MAX_AUTO_CHECKPOINT_BYTES)
}

impl Options {
    /// Frames in the pool: all of `pool_bytes` (the change buffer borrows `flex_pages` of
    /// them as it fills).
    pub fn pool_pages(&self) -> u64 {
        self.pool_bytes / PAGE_SIZE as u64
    }

    /// Frames the change buffer may borrow: its budget, in whole frames.
    pub fn flex_pages(&self) -> u64 {
        self.change_buffer_budget().div_ceil(PAGE_SIZE as u64)
    }

    /// Bytes logged between checkpoints while the database holds `data_bytes` of pages:
    /// `checkpoint_log_bytes`, or by default the larger of the pool's size and twice
    /// `data_bytes`, between [`MIN_AUTO_CHECKPOINT_BYTES`] and [`MAX_AUTO_CHECKPOINT_BYTES`].
    pub fn checkpoint_interval_for(&self, data_bytes: u64) -> u64 {
        self.checkpoint_log_bytes
            .unwrap_or_else(|| auto_checkpoint_interval(self.pool_bytes, data_bytes))
    }

    /// [`Options::checkpoint_interval_for`] an empty database: the least interval these
    /// options give.
    pub fn checkpoint_interval(&self) -> u64 {
        self.checkpoint_interval_for(0)
    }

    /// Bytes the change buffer may hold (see `change_buffer_bytes`): none when read-only.
    pub fn change_buffer_budget(&self) -> u64 {
        if self.read_only {
            return 0;
        }
        self.asked_change_buffer_bytes()
    }

    /// Bytes of the change buffer that transactions' puts may fill (a sixteenth of
    /// [`Options::change_buffer_budget`]): a transaction's put of a key it did not read, whose
    /// leaf is out of memory, waits in the buffer while it fits there, and reads its leaf
    /// otherwise.
    pub fn transaction_buffer_bytes(&self) -> u64 {
        self.change_buffer_budget() / crate::change_buffer::TRANSACTION_SHARE
    }

    /// The change buffer's bytes as configured, read-only or not.
    fn asked_change_buffer_bytes(&self) -> u64 {
        match self.change_buffer_bytes {
            Some(bytes) => bytes,
            None if self.pool_bytes >= 16 << 20 => {
                (self.pool_bytes / 4).min(MAX_CHANGE_BUFFER_BYTES)
            }
            None => 0,
        }
    }

    /// Page ids the page table addresses.
    pub fn max_pages(&self) -> u64 {
        self.max_size_bytes / PAGE_SIZE as u64
    }

    /// The device list as the superblock records it.
    pub(crate) fn device_names(&self) -> Vec<String> {
        self.devices.iter().map(|p| p.display().to_string()).collect()
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let bad = |reason: String| Err(Error::BadOptions { reason });
        if self.pool_pages() > MAX_POOL_PAGES {
            return bad(format!(
                "pool_bytes {} is above the most, {} ({} frames of 4 KiB)",
                self.pool_bytes,
                MAX_POOL_PAGES * PAGE_SIZE as u64,
                MAX_POOL_PAGES
            ));
        }
        if self.asked_change_buffer_bytes() > MAX_CHANGE_BUFFER_BYTES {
            return bad(format!(
                "change_buffer_bytes {} is above the most, {MAX_CHANGE_BUFFER_BYTES}",
                self.asked_change_buffer_bytes()
            ));
        }
        if self.pool_pages().saturating_sub(self.flex_pages()) < MIN_POOL_PAGES {
            return bad(format!(
                "pool_bytes {} less the change buffer's {} is below the minimum of {} pages \
                 ({} bytes)",
                self.pool_bytes,
                self.change_buffer_budget(),
                MIN_POOL_PAGES,
                MIN_POOL_PAGES * PAGE_SIZE as u64
            ));
        }
        if self.object_fragment_bytes == 0 {
            return bad("object_fragment_bytes must be above 0".into());
        }
        if self.max_pages() < 16 || self.max_size_bytes > 1 << 46 {
            return bad(format!(
                "max_size_bytes {} must be between 64 KiB and 64 TiB",
                self.max_size_bytes
            ));
        }
        if self.grow_chunk_bytes < PAGE_SIZE as u64 || self.grow_chunk_bytes > 1 << 32 {
            return bad(format!(
                "grow_chunk_bytes {} must be between one page and 4 GiB",
                self.grow_chunk_bytes
            ));
        }
        if self.workers > 1024 {
            return bad(format!("workers {} is above the maximum of 1024", self.workers));
        }
        if self.stripe_chunk_bytes == 0 || self.stripe_chunk_bytes % PAGE_SIZE as u64 != 0 {
            return bad(format!(
                "stripe_chunk_bytes {} must be a positive multiple of {PAGE_SIZE}",
                self.stripe_chunk_bytes
            ));
        }
        let listed = self.device_names();
        if crate::format::superblock::device_list_bytes(&listed)
            > crate::format::superblock::MAX_DEVICE_LIST_BYTES
            || listed.len() > u16::MAX as usize
        {
            return bad("the device paths are too long to record in the superblock".into());
        }
        if self.log_segment_bytes < 1 << 20 || self.log_segment_bytes > 1 << 32 {
            return bad(format!(
                "log_segment_bytes {} must be between 1 MiB and 4 GiB",
                self.log_segment_bytes
            ));
        }
        if let Some(bytes) = self.checkpoint_log_bytes.filter(|&b| b < 64 << 10) {
            return bad(format!("checkpoint_log_bytes {bytes} must be at least 64 KiB"));
        }
        if let Durability::Periodic(interval) = self.durability {
            if interval.is_zero() || interval > std::time::Duration::from_secs(3600) {
                return bad(format!(
                    "a periodic flush interval must be between 1 ns and an hour, not {interval:?}"
                ));
            }
        }
        if self.io_depth == 0 || self.io_depth > 4096 {
            return bad(format!("io_depth {} must be between 1 and 4096", self.io_depth));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_checkpoint_interval_follows_the_pool_and_the_data_within_bounds() {
        let with_pool = |pool_bytes: u64| Options { pool_bytes, ..Options::default() };
        assert_eq!(with_pool(64 << 20).checkpoint_interval(), MIN_AUTO_CHECKPOINT_BYTES);
        assert_eq!(with_pool(512 << 20).checkpoint_interval(), 512 << 20);
        assert_eq!(with_pool(1 << 30).checkpoint_interval(), 1 << 30);
        assert_eq!(with_pool(16 << 30).checkpoint_interval(), MAX_AUTO_CHECKPOINT_BYTES);
        let set = Options { checkpoint_log_bytes: Some(1 << 20), ..with_pool(16 << 30) };
        assert_eq!(set.checkpoint_interval(), 1 << 20, "a set interval is kept");
        assert_eq!(set.checkpoint_interval_for(1 << 40), 1 << 20, "whatever the data");
        // Data larger than half the pool: twice the data, within the same bounds.
        let small = with_pool(40 << 20);
        assert_eq!(small.checkpoint_interval_for(100 << 20), MIN_AUTO_CHECKPOINT_BYTES);
        assert_eq!(small.checkpoint_interval_for(409 << 20), 818 << 20);
        assert_eq!(small.checkpoint_interval_for(4 << 30), MAX_AUTO_CHECKPOINT_BYTES);
        assert_eq!(small.checkpoint_interval_for(u64::MAX), MAX_AUTO_CHECKPOINT_BYTES);
        assert_eq!(with_pool(768 << 20).checkpoint_interval_for(100 << 20), 768 << 20);
        assert!(Options { checkpoint_log_bytes: Some(1 << 10), ..Options::default() }
            .validate()
            .is_err());
    }
}
