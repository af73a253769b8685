//! A simulated disk for tests: a [`Storage`] whose files are bytes in memory, with the page
//! cache, power cuts, torn writes and injected I/O errors of a real one, every random choice
//! drawn from one seed so that a failure replays exactly. Put it behind
//! `Options::storage` (or [`PageFile::open_on`](crate::io::PageFile::open_on)) and the engine runs
//! on it unchanged; [`SimDisk::crash`] cuts the power.
//!
//! # The state of a file
//!
//! Each file keeps three things. Reads see the *cache* (what the OS page cache would show);
//! what a crash leaves is built from the other two.
//!
//! | part               | holds                                        | reads see it            |
//! |--------------------|----------------------------------------------|-------------------------|
//! | durable bytes      | what survives any crash                      | under the pending part  |
//! | pending writes     | the writes since the last sync, in order     | applied in order        |
//! | pending allocation | the largest `allocate` since the last sync   | as length (zeros)       |
//!
//! How calls move a file between its states:
//!
//! | call                | durable bytes                      | pending writes / allocation  |
//! |---------------------|------------------------------------|------------------------------|
//! | `write_at`          | unchanged                          | the write is appended        |
//! | `allocate`          | unchanged                          | grows (never shrinks)        |
//! | `sync`, succeeds    | gain the pending writes, in order, | emptied                      |
//! |                     | then the allocation                |                              |
//! | `sync`, fails (EIO) | unchanged                          | emptied: *lost on crash*     |
//! | [`SimDisk::crash`]  | gain the writes that landed        | emptied                      |
//!
//! - **Crash.** Every pending write, independently, is lost entirely, lands entirely, or is
//!   torn: each of its 512-byte sectors ([`SECTOR_BYTES`], aligned to absolute offsets of the
//!   file; a partial first or last sector counts as one) lands or not. Landed bytes are
//!   applied in the order they were written. A file's durable length grows only as far as
//!   landed bytes reach (with zeros in any gap); pending allocations are lost. Every handle
//!   opened before the crash then fails every call (`ErrorKind::Other`, "the simulated disk
//!   crashed"): the engine that held them is dead. Files opened anew work on what the crash left.
//! - **Lost on crash.** A failed sync drops its file's pending writes the way Linux does: the
//!   cache still shows them (until overwritten), a later sync succeeds without them, and the
//!   next crash forgets them as if they had never been written.
//! - **Names.** Creating a file (`open(name, true)`) and removing one are durable at once;
//!   [`Storage::sync_names`] does nothing but may fail like a sync. A handle to a removed
//!   file keeps working (as an unlinked inode does) until it is dropped or the disk crashes.
//!
//! # Faults
//!
//! | call                   | fault                                  | effect                    |
//! |------------------------|----------------------------------------|---------------------------|
//! | `read_at`              | `read_error_per_million`               | EIO; nothing changes      |
//! | `write_at`             | `write_error_per_million`, or          | EIO; none or a strict     |
//! |                        | [`SimDisk::fail_next_write`]           | prefix of the write's     |
//! |                        |                                        | sectors is written        |
//! | `sync`                 | `sync_error_per_million`, or           | EIO; the pending writes   |
//! |                        | [`SimDisk::fail_next_sync`]            | are lost on crash         |
//! | `sync_names`           | `sync_error_per_million`               | EIO; nothing changes      |
//! | `write_at`, `allocate` | the files' lengths would pass          | ENOSPC; nothing changes   |
//! |                        | `capacity_bytes`                       |                           |
//!
//! A file never grows past [`MAX_FILE_BYTES`] (EFBIG): everything is in memory.
//!
//! # Engine
//!
//! The workers run on a simulated disk through `io::BlockEngine`, the engine of any page
//! file that lives on a [`BlockDevice`] (`PageFile::own_engine`): synchronous, so every
//! request meets the disk's faults, crashes and capacity.
//!
//! Random choices come from one generator (`testing::Rng`, splitmix64) seeded by [`SimFaults::seed`], drawn
//! in the order of the calls: the same calls in the same order give the same disk. A rate of
//! zero (or a certainty) draws nothing: a disk without faults draws only when it crashes.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::rng::Rng;
use crate::io::{BlockDevice, Storage};

/// The unit a crash tears writes at, in bytes.
pub const SECTOR_BYTES: u64 = 512;

/// Largest simulated file, in bytes: every byte lives in memory (twice).
pub const MAX_FILE_BYTES: u64 = 1 << 32;

/// What goes wrong on a [`SimDisk`], and the seed of every random choice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimFaults {
    /// Seeds the generator behind crashes, tears and faults.
    pub seed: u64,
    /// Chance that a `read_at` fails with EIO, per million calls.
    pub read_error_per_million: u32,
    /// Chance that a `write_at` fails with EIO, per million calls.
    pub write_error_per_million: u32,
    /// Chance that a `sync` or `sync_names` fails with EIO, per million calls.
    pub sync_error_per_million: u32,
    /// Most bytes all files together may hold (their lengths, pending parts included);
    /// `None` is unlimited.
    pub capacity_bytes: Option<u64>,
}

/// The error of every call on a handle opened before a crash.
fn crashed() -> io::Error {
    io::Error::other("the simulated disk crashed")
}

fn eio() -> io::Error {
    io::Error::from_raw_os_error(libc::EIO)
}

fn enospc() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOSPC)
}

fn efbig() -> io::Error {
    io::Error::from_raw_os_error(libc::EFBIG)
}

/// The sectors `offset..offset + len_bytes` touches, as absolute byte ranges clipped to it.
fn sectors(offset: u64, len_bytes: u64) -> impl Iterator<Item = (u64, u64)> {
    let end = offset + len_bytes;
    let first = offset / SECTOR_BYTES;
    let last = end.div_ceil(SECTOR_BYTES);
    (first..last).map(move |s| ((s * SECTOR_BYTES).max(offset), ((s + 1) * SECTOR_BYTES).min(end)))
}

/// Copies `bytes` into `image` at `offset`, growing it with zeros as needed.
fn put(image: &mut Vec<u8>, offset: u64, bytes: &[u8]) {
    let start = offset as usize;
    let end = start + bytes.len();
    if image.len() < end {
        image.resize(end, 0);
    }
    image[start..end].copy_from_slice(bytes);
}

/// One write since the last sync.
#[derive(Debug, Clone)]
struct PendingWrite {
    offset: u64,
    bytes: Vec<u8>,
}

type InodeId = u64;

/// One file's bytes, whatever names it (see the module documentation for the states).
#[derive(Debug, Default)]
struct Inode {
    durable: Vec<u8>,
    pending: Vec<PendingWrite>,
    /// The largest `allocate` since the last sync (0: none).
    pending_allocation_bytes: u64,
    /// What reads see.
    cache: Vec<u8>,
    /// A failed sync dropped writes the cache still shows since the last crash.
    cache_shows_lost_writes: bool,
    /// Linked under a name (false once removed).
    linked: bool,
    /// Live handles (of the current generation).
    handles: usize,
}

impl Inode {
    fn len_bytes(&self) -> u64 {
        self.cache.len() as u64
    }

    /// The cache as it must be unless a failed sync dropped writes: durable bytes with the
    /// pending writes and allocation applied.
    fn replay(&self) -> Vec<u8> {
        let mut image = self.durable.clone();
        for write in &self.pending {
            put(&mut image, write.offset, &write.bytes);
        }
        if (image.len() as u64) < self.pending_allocation_bytes {
            image.resize(self.pending_allocation_bytes as usize, 0);
        }
        image
    }

    fn write_pending(&mut self, offset: u64, bytes: &[u8]) {
        put(&mut self.cache, offset, bytes);
        self.pending.push(PendingWrite { offset, bytes: bytes.to_vec() });
    }

    fn sync(&mut self) {
        for write in std::mem::take(&mut self.pending) {
            put(&mut self.durable, write.offset, &write.bytes);
        }
        if (self.durable.len() as u64) < self.pending_allocation_bytes {
            self.durable.resize(self.pending_allocation_bytes as usize, 0);
        }
        self.pending_allocation_bytes = 0;
    }

    fn drop_pending(&mut self) {
        if !self.pending.is_empty() || self.pending_allocation_bytes > 0 {
            self.cache_shows_lost_writes = true;
        }
        self.pending.clear();
        self.pending_allocation_bytes = 0;
    }

    /// The power cut, for this file: each pending write lost, landed or torn.
    fn crash(&mut self, rng: &mut Rng) {
        for write in std::mem::take(&mut self.pending) {
            match rng.below(3) {
                0 => {}
                1 => put(&mut self.durable, write.offset, &write.bytes),
                _ => {
                    for (start, end) in sectors(write.offset, write.bytes.len() as u64) {
                        if rng.coin() {
                            let from = (start - write.offset) as usize;
                            let to = (end - write.offset) as usize;
                            put(&mut self.durable, start, &write.bytes[from..to]);
                        }
                    }
                }
            }
        }
        self.pending_allocation_bytes = 0;
        self.cache = self.durable.clone();
        self.cache_shows_lost_writes = false;
        self.handles = 0;
    }
}

/// Everything behind the disk's one lock.
#[derive(Debug)]
struct DiskState {
    faults: SimFaults,
    rng: Rng,
    names: BTreeMap<String, InodeId>,
    /// Ordered, so that a crash draws for the files in a fixed order.
    inodes: BTreeMap<InodeId, Inode>,
    next_inode: InodeId,
    /// Crashes so far; a handle of an older generation is dead.
    generation: u64,
    fail_next_write: bool,
    fail_next_sync: bool,
    writes: u64,
    syncs: u64,
    bytes_written: u64,
}

impl DiskState {
    fn used_bytes(&self) -> u64 {
        self.inodes.values().map(Inode::len_bytes).sum()
    }

    /// Refuses growth of `growth_bytes` beyond the capacity.
    fn check_capacity(&self, growth_bytes: u64) -> io::Result<()> {
        match self.faults.capacity_bytes {
            Some(capacity) if growth_bytes > 0 && self.used_bytes() + growth_bytes > capacity => {
                Err(enospc())
            }
            _ => Ok(()),
        }
    }

    fn inode(&mut self, id: InodeId) -> &mut Inode {
        self.inodes.get_mut(&id).expect("a live handle's inode exists")
    }

    fn read(&mut self, id: InodeId, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if self.rng.chance(self.faults.read_error_per_million) {
            return Err(eio());
        }
        let cache = &self.inode(id).cache;
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(cache.len());
        let n = buf.len().min(cache.len() - start);
        buf[..n].copy_from_slice(&cache[start..start + n]);
        Ok(n)
    }

    fn write(&mut self, id: InodeId, buf: &[u8], offset: u64) -> io::Result<()> {
        let len_bytes = buf.len() as u64;
        let end = offset.checked_add(len_bytes).filter(|&end| end <= MAX_FILE_BYTES);
        let end = end.ok_or_else(efbig)?;
        if buf.is_empty() {
            return Ok(());
        }
        let growth_bytes = end.saturating_sub(self.inode(id).len_bytes());
        self.check_capacity(growth_bytes)?;
        let fail = std::mem::take(&mut self.fail_next_write)
            || self.rng.chance(self.faults.write_error_per_million);
        if fail {
            // A failed write may have written some of its sectors, from the first.
            let sector_count = sectors(offset, len_bytes).count() as u64;
            let landed = self.rng.below(sector_count);
            if landed > 0 {
                let landed_end = ((offset / SECTOR_BYTES + landed) * SECTOR_BYTES).min(end);
                let prefix = &buf[..(landed_end - offset) as usize];
                self.inode(id).write_pending(offset, prefix);
            }
            return Err(eio());
        }
        self.inode(id).write_pending(offset, buf);
        self.writes += 1;
        self.bytes_written += len_bytes;
        Ok(())
    }

    fn allocate(&mut self, id: InodeId, len_bytes: u64) -> io::Result<()> {
        if len_bytes > MAX_FILE_BYTES {
            return Err(efbig());
        }
        let current = self.inode(id).len_bytes();
        if len_bytes <= current {
            return Ok(());
        }
        self.check_capacity(len_bytes - current)?;
        let inode = self.inode(id);
        inode.cache.resize(len_bytes as usize, 0);
        inode.pending_allocation_bytes = inode.pending_allocation_bytes.max(len_bytes);
        Ok(())
    }

    fn sync(&mut self, id: InodeId) -> io::Result<()> {
        let fail = std::mem::take(&mut self.fail_next_sync)
            || self.rng.chance(self.faults.sync_error_per_million);
        if fail {
            self.inode(id).drop_pending();
            return Err(eio());
        }
        self.inode(id).sync();
        self.syncs += 1;
        Ok(())
    }

    fn crash(&mut self) {
        self.generation += 1;
        self.inodes.retain(|_, inode| inode.linked);
        for inode in self.inodes.values_mut() {
            inode.crash(&mut self.rng);
        }
    }

    /// Opens a handle on `id`.
    fn attach(&mut self, id: InodeId) {
        self.inode(id).handles += 1;
    }

    /// Drops a handle of the current generation on `id`; an unlinked file goes with its last.
    fn detach(&mut self, id: InodeId) {
        let inode = self.inode(id);
        inode.handles -= 1;
        if inode.handles == 0 && !inode.linked {
            self.inodes.remove(&id);
        }
    }
}

type Shared = Arc<Mutex<DiskState>>;

fn lock(shared: &Shared) -> MutexGuard<'_, DiskState> {
    // A test that panicked with the lock held leaves a state still worth inspecting.
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A simulated disk: named files in memory, crashed and failed on demand (see the module
/// documentation). Shared as `Arc<SimDisk>`; every handle it opens refers back to it.
pub struct SimDisk {
    shared: Shared,
}

impl fmt::Debug for SimDisk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = lock(&self.shared);
        f.debug_struct("SimDisk")
            .field("faults", &state.faults)
            .field("files", &state.names.keys().collect::<Vec<_>>())
            .field("crashes", &state.generation)
            .finish_non_exhaustive()
    }
}

impl SimDisk {
    /// An empty disk without faults, its random choices seeded by `seed`.
    pub fn new(seed: u64) -> Arc<SimDisk> {
        SimDisk::with_faults(SimFaults { seed, ..SimFaults::default() })
    }

    /// An empty disk with `faults`.
    pub fn with_faults(faults: SimFaults) -> Arc<SimDisk> {
        let state = DiskState {
            faults,
            rng: Rng::new(faults.seed),
            names: BTreeMap::new(),
            inodes: BTreeMap::new(),
            next_inode: 0,
            generation: 0,
            fail_next_write: false,
            fail_next_sync: false,
            writes: 0,
            syncs: 0,
            bytes_written: 0,
        };
        Arc::new(SimDisk { shared: Arc::new(Mutex::new(state)) })
    }

    /// Changes the fault rates and the capacity from now on. `faults.seed` is ignored: the
    /// generator goes on with its sequence, so the run still replays from the first seed.
    pub fn set_faults(&self, faults: SimFaults) {
        let mut state = lock(&self.shared);
        state.faults = SimFaults { seed: state.faults.seed, ..faults };
    }

    /// The faults in force.
    pub fn faults(&self) -> SimFaults {
        lock(&self.shared).faults
    }

    /// The next `write_at` on any file fails with EIO (as an injected write error does).
    pub fn fail_next_write(&self) {
        lock(&self.shared).fail_next_write = true;
    }

    /// The next `sync` of any file fails with EIO (as an injected sync error does);
    /// `sync_names` does not take it.
    pub fn fail_next_sync(&self) {
        lock(&self.shared).fail_next_sync = true;
    }

    /// Cuts the power: every pending write is lost, lands or is torn, and every handle
    /// opened so far fails from now on (see the module documentation).
    pub fn crash(&self) {
        lock(&self.shared).crash();
    }

    /// Crashes so far.
    pub fn crash_count(&self) -> u64 {
        lock(&self.shared).generation
    }

    /// Successful `write_at` calls so far.
    pub fn writes(&self) -> u64 {
        lock(&self.shared).writes
    }

    /// Successful file `sync` calls so far (`sync_names` not counted).
    pub fn syncs(&self) -> u64 {
        lock(&self.shared).syncs
    }

    /// Bytes of the successful `write_at` calls so far.
    pub fn bytes_written(&self) -> u64 {
        lock(&self.shared).bytes_written
    }

    /// The names of the files, sorted.
    pub fn file_names(&self) -> Vec<String> {
        lock(&self.shared).names.keys().cloned().collect()
    }

    /// Bytes of file `name` that would survive a crash for sure; `None` if no such file.
    pub fn durable_len(&self, name: &str) -> Option<u64> {
        let state = lock(&self.shared);
        let id = state.names.get(name)?;
        Some(state.inodes[id].durable.len() as u64)
    }

    /// A new disk holding what a crash would leave of this one for sure (every file's durable
    /// bytes; pending writes are not copied), with the same faults and seed: a crash image to
    /// damage and recover without touching this one.
    pub fn copy_durable(&self) -> Arc<SimDisk> {
        let state = lock(&self.shared);
        let copy = SimDisk::with_faults(state.faults);
        {
            let mut target = lock(&copy.shared);
            for (name, id) in &state.names {
                let durable = state.inodes[id].durable.clone();
                let inode =
                    Inode { cache: durable.clone(), durable, linked: true, ..Inode::default() };
                let new_id = target.next_inode;
                target.next_inode += 1;
                target.inodes.insert(new_id, inode);
                target.names.insert(name.clone(), new_id);
            }
        }
        copy
    }

    /// File `name`'s bytes as reads see them; `None` if no such file.
    pub fn read_file(&self, name: &str) -> Option<Vec<u8>> {
        let state = lock(&self.shared);
        let id = state.names.get(name)?;
        Some(state.inodes[id].cache.clone())
    }

    /// Replaces file `name`'s bytes (made if missing), durably at once: damage done to a
    /// crash image, as by hand.
    pub fn replace_file(&self, name: &str, bytes: &[u8]) {
        let mut state = lock(&self.shared);
        let id = match state.names.get(name) {
            Some(&id) => id,
            None => {
                let id = state.next_inode;
                state.next_inode += 1;
                state.inodes.insert(id, Inode { linked: true, ..Inode::default() });
                state.names.insert(name.to_owned(), id);
                id
            }
        };
        let inode = state.inode(id);
        inode.durable = bytes.to_vec();
        inode.cache = bytes.to_vec();
        inode.pending.clear();
        inode.pending_allocation_bytes = 0;
    }

    /// Asserts the invariants of every file (see the module documentation): the cache is
    /// the durable bytes with the pending part applied (unless a failed sync dropped
    /// writes since the last crash), never shorter than them, and every name is linked.
    pub fn check_invariants(&self) {
        let state = lock(&self.shared);
        for (name, id) in &state.names {
            assert!(state.inodes.get(id).is_some_and(|inode| inode.linked), "{name} unlinked");
        }
        assert_eq!(
            state.inodes.values().filter(|inode| inode.linked).count(),
            state.names.len(),
            "a linked file without a name"
        );
        for (id, inode) in &state.inodes {
            assert!(inode.linked || inode.handles > 0, "inode {id}: unlinked and unused");
            assert!(inode.cache.len() >= inode.durable.len(), "inode {id}: cache shorter");
            if !inode.cache_shows_lost_writes {
                assert!(inode.cache == inode.replay(), "inode {id}: cache is not the replay");
            }
        }
    }
}

impl Storage for SimDisk {
    fn open(&self, name: &str, create: bool) -> io::Result<Option<Arc<dyn BlockDevice>>> {
        if name.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty file name"));
        }
        let mut state = lock(&self.shared);
        let id = match state.names.get(name) {
            Some(&id) => id,
            None if create => {
                let id = state.next_inode;
                state.next_inode += 1;
                state.inodes.insert(id, Inode { linked: true, ..Inode::default() });
                state.names.insert(name.to_owned(), id);
                id
            }
            None => return Ok(None),
        };
        state.attach(id);
        let file = SimFile {
            shared: Arc::clone(&self.shared),
            inode: id,
            generation: state.generation,
            path: self.path(name),
        };
        Ok(Some(Arc::new(file)))
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        let mut state = lock(&self.shared);
        if let Some(id) = state.names.remove(name) {
            let inode = state.inode(id);
            inode.linked = false;
            if inode.handles == 0 {
                state.inodes.remove(&id);
            }
        }
        Ok(())
    }

    fn sync_names(&self) -> io::Result<()> {
        let mut state = lock(&self.shared);
        let rate = state.faults.sync_error_per_million;
        if state.rng.chance(rate) {
            return Err(eio());
        }
        Ok(())
    }

    fn list(&self, dir: &str) -> io::Result<Vec<String>> {
        let prefix = format!("{dir}/");
        let state = lock(&self.shared);
        Ok(state.names.keys().filter(|name| name.starts_with(&prefix)).cloned().collect())
    }

    fn path(&self, name: &str) -> PathBuf {
        PathBuf::from(format!("sim://{name}"))
    }
}

/// A handle on one file of a [`SimDisk`]; dead (every call fails) once the disk crashed.
pub struct SimFile {
    shared: Shared,
    inode: InodeId,
    /// The disk's crash count when this handle was opened.
    generation: u64,
    path: PathBuf,
}

impl fmt::Debug for SimFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimFile")
            .field("path", &self.path)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl SimFile {
    /// The disk's state, if this handle is still alive.
    fn live(&self) -> io::Result<MutexGuard<'_, DiskState>> {
        let state = lock(&self.shared);
        if state.generation != self.generation {
            return Err(crashed());
        }
        Ok(state)
    }
}

impl Drop for SimFile {
    fn drop(&mut self) {
        if let Ok(mut state) = self.live() {
            state.detach(self.inode);
        }
    }
}

impl BlockDevice for SimFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.live()?.read(self.inode, buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.live()?.write(self.inode, buf, offset)
    }

    fn sync(&self) -> io::Result<()> {
        self.live()?.sync(self.inode)
    }

    fn len(&self) -> io::Result<u64> {
        let mut state = self.live()?;
        Ok(state.inode(self.inode).len_bytes())
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        self.live()?.allocate(self.inode, len)
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::format::page::PAGE_SIZE;
    use crate::io::PageFile;
    use crate::testing::rng::PER_MILLION;

    fn open(disk: &SimDisk, name: &str) -> Arc<dyn BlockDevice> {
        disk.open(name, true).unwrap().unwrap()
    }

    fn read_all(file: &dyn BlockDevice) -> Vec<u8> {
        let mut buf = vec![0u8; file.len().unwrap() as usize];
        assert_eq!(file.read_at(&mut buf, 0).unwrap(), buf.len());
        buf
    }

    fn os_error(result: io::Result<impl fmt::Debug>) -> i32 {
        result.unwrap_err().raw_os_error().expect("an OS error")
    }

    #[test]
    fn reads_see_writes_before_sync() {
        let disk = SimDisk::new(1);
        let file = open(&disk, "a");
        assert_eq!(file.path(), Path::new("sim://a"));
        file.write_at(b"hello", 10).unwrap();
        file.write_at(b"J", 10).unwrap();
        assert_eq!(file.len().unwrap(), 15);
        let mut buf = [0xffu8; 20];
        assert_eq!(file.read_at(&mut buf, 8).unwrap(), 7);
        assert_eq!(&buf[..7], b"\0\0Jello");
        assert_eq!(file.read_at(&mut buf, 100).unwrap(), 0);
        file.allocate(40).unwrap();
        file.allocate(20).unwrap();
        assert_eq!(file.len().unwrap(), 40);
        assert_eq!(disk.durable_len("a"), Some(0));
        assert_eq!((disk.writes(), disk.bytes_written(), disk.syncs()), (2, 6, 0));
        disk.check_invariants();
    }

    #[test]
    fn synced_writes_survive_a_crash() {
        let disk = SimDisk::new(2);
        let file = open(&disk, "wal/0.log");
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        file.write_at(&data, 0).unwrap();
        file.write_at(b"tail", 5000).unwrap();
        file.allocate(8192).unwrap();
        file.sync().unwrap();
        assert_eq!(disk.durable_len("wal/0.log"), Some(8192));
        disk.check_invariants();
        disk.crash();
        assert_eq!(disk.crash_count(), 1);
        disk.check_invariants();
        let file = disk.open("wal/0.log", false).unwrap().unwrap();
        let back = read_all(file.as_ref());
        assert_eq!(back.len(), 8192);
        assert_eq!(&back[..5000], &data[..]);
        assert_eq!(&back[5000..5004], b"tail");
        assert!(back[5004..].iter().all(|&b| b == 0));
        assert_eq!(disk.file_names(), ["wal/0.log"]);
    }

    /// What a crash did to one pending write.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    enum Outcome {
        Lost,
        Landed,
        Torn,
    }

    /// Writes `old` (synced), then `new` at `at` (not synced), crashes and classifies what
    /// the write became, checking that every sector holds either old or new bytes.
    fn crash_one_write(seed: u64, at: u64, new_len: usize) -> (Outcome, Vec<u8>) {
        let disk = SimDisk::new(seed);
        let file = open(&disk, "f");
        let old = vec![0x11u8; 4096];
        file.write_at(&old, 0).unwrap();
        file.sync().unwrap();
        let new: Vec<u8> = (0..new_len).map(|i| 0x80 | (i % 100) as u8).collect();
        file.write_at(&new, at).unwrap();
        disk.crash();
        disk.check_invariants();
        let after = read_all(open(&disk, "f").as_ref());
        assert!(after.len() >= old.len(), "seed {seed}: durable bytes shrank");
        let mut landed_sectors = 0;
        let mut sector_count = 0;
        for (start, end) in sectors(at, new_len as u64) {
            sector_count += 1;
            let (s, e) = (start as usize, end as usize);
            let new_part = &new[s - at as usize..e - at as usize];
            let got = after.get(s..e);
            if got == Some(new_part) {
                landed_sectors += 1;
            } else {
                // Old bytes, or (past the old end) zeros or nothing.
                let old_part: Vec<u8> = (s..e).map(|i| old.get(i).copied().unwrap_or(0)).collect();
                let past_end = after.len() <= s;
                assert!(
                    past_end || after.get(s..e) == Some(&old_part[..]),
                    "seed {seed}: sector at {start} is neither old nor new"
                );
            }
        }
        for (i, &b) in after.iter().enumerate() {
            if (i as u64) < at || i as u64 >= at + new_len as u64 {
                assert_eq!(b, old.get(i).copied().unwrap_or(0), "seed {seed}: byte {i} moved");
            }
        }
        let outcome = match landed_sectors {
            0 => Outcome::Lost,
            n if n == sector_count => Outcome::Landed,
            _ => Outcome::Torn,
        };
        (outcome, after)
    }

    #[test]
    fn a_crash_loses_lands_or_tears_pending_writes_by_sector() {
        let mut seen = std::collections::HashSet::new();
        for seed in 0..200 {
            // Partial first and last sectors, inside the old bytes.
            seen.insert(crash_one_write(seed, 100, 3000).0);
        }
        assert_eq!(seen.len(), 3, "{seen:?}");
        let mut seen = std::collections::HashSet::new();
        for seed in 0..200 {
            // Over the end of the file: it grows only as far as landed sectors reach.
            let (outcome, after) = crash_one_write(seed, 3900, 2000);
            let expected = match outcome {
                Outcome::Lost => Some(4096),
                Outcome::Landed => Some(5900),
                Outcome::Torn => None,
            };
            if let Some(len) = expected {
                assert_eq!(after.len(), len, "seed {seed}: {outcome:?}");
            }
            assert!(after.len() == 4096 || after.len() % 512 == 0 || after.len() == 5900);
            seen.insert(outcome);
        }
        assert_eq!(seen.len(), 3, "{seen:?}");
    }

    #[test]
    fn the_same_seed_gives_the_same_crash() {
        let run = |seed| -> Vec<Vec<u8>> {
            let disk = SimDisk::new(seed);
            let files: Vec<_> = (0..3).map(|i| open(&disk, &format!("f{i}"))).collect();
            for round in 0..20u64 {
                for (i, file) in files.iter().enumerate() {
                    let bytes = vec![(round * 3 + i as u64) as u8; 700 + 100 * i];
                    file.write_at(&bytes, round * 333).unwrap();
                }
            }
            disk.crash();
            (0..3).map(|i| read_all(open(&disk, &format!("f{i}")).as_ref())).collect()
        };
        for seed in [0, 7, 12345] {
            assert_eq!(run(seed), run(seed), "seed {seed}");
        }
        assert!((0..4).any(|seed| run(seed) != run(seed + 100)), "seeds make no difference");
    }

    #[test]
    fn handles_opened_before_a_crash_fail() {
        let disk = SimDisk::new(3);
        let old = open(&disk, "f");
        old.write_at(b"abc", 0).unwrap();
        old.sync().unwrap();
        let unlinked = open(&disk, "gone");
        disk.remove("gone").unwrap();
        disk.crash();
        let mut buf = [0u8; 3];
        let errors = [
            old.read_at(&mut buf, 0).map(drop),
            old.write_at(b"x", 0),
            old.sync(),
            old.len().map(drop),
            old.is_empty().map(drop),
            old.allocate(100),
            unlinked.len().map(drop),
        ];
        for error in errors {
            let error = error.unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::Other);
            assert_eq!(error.to_string(), "the simulated disk crashed");
        }
        let new = disk.open("f", false).unwrap().unwrap();
        assert_eq!(read_all(new.as_ref()), b"abc");
        drop(old);
        drop(unlinked);
        assert_eq!(disk.file_names(), ["f"]);
        assert!(disk.open("gone", false).unwrap().is_none());
        disk.check_invariants();
    }

    #[test]
    fn removed_files_live_on_while_open_and_names_are_durable_at_once() {
        let disk =
            SimDisk::with_faults(SimFaults { capacity_bytes: Some(100), ..SimFaults::default() });
        let a = open(&disk, "a");
        a.write_at(&[1; 60], 0).unwrap();
        disk.remove("a").unwrap();
        disk.remove("a").unwrap();
        assert!(disk.open("a", false).unwrap().is_none());
        assert_eq!(read_all(a.as_ref()), [1; 60]);
        let b = open(&disk, "b");
        assert_eq!(os_error(b.write_at(&[2; 60], 0)), libc::ENOSPC, "a's bytes still count");
        drop(a);
        b.write_at(&[2; 60], 0).unwrap();
        disk.check_invariants();
        disk.crash();
        assert_eq!(disk.file_names(), ["b"], "created without sync_names, still there");
        assert_eq!(disk.durable_len("b"), Some(0));
    }

    #[test]
    fn injected_errors_at_full_rates() {
        let all = SimFaults {
            seed: 4,
            read_error_per_million: PER_MILLION,
            write_error_per_million: PER_MILLION,
            sync_error_per_million: PER_MILLION,
            capacity_bytes: None,
        };
        let disk = SimDisk::new(4);
        let file = open(&disk, "f");
        file.write_at(&[7; 2048], 0).unwrap();
        file.sync().unwrap();
        disk.set_faults(all);
        assert_eq!(disk.faults(), all);
        let mut buf = [0u8; 16];
        assert_eq!(os_error(file.read_at(&mut buf, 0)), libc::EIO);
        assert_eq!(buf, [0; 16], "a failed read changes nothing");
        assert_eq!(os_error(file.write_at(&[9; 1000], 4096)), libc::EIO);
        assert_eq!(os_error(file.sync()), libc::EIO);
        assert_eq!(os_error(disk.sync_names()), libc::EIO);
        assert_eq!((disk.writes(), disk.syncs()), (1, 1), "failures are not counted");
        disk.set_faults(SimFaults::default());
        assert_eq!(file.read_at(&mut buf, 0).unwrap(), 16);
        assert_eq!(buf, [7; 16]);
        disk.sync_names().unwrap();
        disk.check_invariants();
    }

    #[test]
    fn a_failed_write_leaves_none_or_a_prefix_of_its_sectors() {
        let mut prefixes = std::collections::HashSet::new();
        for seed in 0..100 {
            let disk = SimDisk::new(seed);
            let file = open(&disk, "f");
            file.write_at(&[1; 4096], 0).unwrap();
            disk.fail_next_write();
            assert_eq!(os_error(file.write_at(&[2; 2000], 300)), libc::EIO);
            let after = read_all(file.as_ref());
            assert_eq!(after.len(), 4096);
            let end = 300 + after[300..].iter().position(|&b| b != 2).expect("old bytes remain");
            assert!(after[..300].iter().all(|&b| b == 1));
            assert!(after[end..].iter().all(|&b| b == 1), "seed {seed}: not a prefix");
            assert!(end == 300 || end % 512 == 0, "seed {seed}: ends inside a sector");
            prefixes.insert(end);
            disk.check_invariants();
        }
        assert!(prefixes.len() >= 3, "{prefixes:?}");
    }

    #[test]
    fn a_failed_syncs_writes_are_lost_at_the_crash() {
        let disk = SimDisk::new(5);
        let file = open(&disk, "f");
        file.write_at(&[1; 1024], 0).unwrap();
        file.sync().unwrap();
        file.write_at(&[2; 1024], 512).unwrap();
        disk.fail_next_sync();
        assert_eq!(os_error(file.sync()), libc::EIO);
        // The cache still shows them, and a later sync succeeds without them.
        assert_eq!(read_all(file.as_ref())[1000], 2);
        file.write_at(&[3; 10], 0).unwrap();
        file.sync().unwrap();
        assert_eq!(disk.durable_len("f"), Some(1024));
        disk.check_invariants();
        disk.crash();
        let mut expected = vec![1u8; 1024];
        expected[..10].fill(3);
        assert_eq!(read_all(open(&disk, "f").as_ref()), expected);
    }

    #[test]
    fn writes_past_the_capacity_fail_with_enospc_and_change_nothing() {
        let faults = SimFaults { seed: 6, capacity_bytes: Some(4096), ..SimFaults::default() };
        let disk = SimDisk::with_faults(faults);
        let a = open(&disk, "a");
        let b = open(&disk, "b");
        a.write_at(&[1; 3000], 0).unwrap();
        b.allocate(1000).unwrap();
        assert_eq!(os_error(a.write_at(&[2; 200], 3000)), libc::ENOSPC);
        assert_eq!(os_error(b.allocate(1200)), libc::ENOSPC);
        assert_eq!(os_error(b.write_at(&[2; 2], 1095)), libc::ENOSPC);
        assert_eq!((a.len().unwrap(), b.len().unwrap()), (3000, 1000));
        assert_eq!(read_all(a.as_ref()), [1; 3000]);
        a.write_at(&[2; 200], 2800).unwrap();
        b.write_at(&[2; 96], 1000).unwrap();
        assert_eq!(os_error(a.write_at(&[0], 10_000)), libc::ENOSPC);
        disk.set_faults(SimFaults::default());
        assert_eq!(os_error(a.write_at(&[0], MAX_FILE_BYTES)), libc::EFBIG);
        assert_eq!((disk.writes(), disk.bytes_written()), (3, 3296));
        disk.check_invariants();
    }

    fn page(fill: u8) -> Vec<u8> {
        vec![fill; PAGE_SIZE]
    }

    #[test]
    fn a_page_file_on_a_simulated_disk_round_trips_and_survives_a_synced_crash() {
        let disk = SimDisk::new(7);
        let file = PageFile::open_on(open(&disk, "pages"), true, 3 * PAGE_SIZE as u64).unwrap();
        assert!(file.devices().is_none() && !file.is_direct());
        assert_eq!(file.path(), Path::new("sim://pages"));
        assert_eq!(file.size_pages(), 0);
        file.write_page(1, &page(0xab)).unwrap();
        assert_eq!(file.size_pages(), 3);
        file.write_page(4, &page(0xcd)).unwrap();
        assert_eq!(file.size_pages(), 6);
        assert_eq!(file.locate(4), (0, 4 * PAGE_SIZE as u64));
        let mut back = page(0);
        file.read_page(1, &mut back).unwrap();
        assert_eq!(back, page(0xab));
        file.read_page(1000, &mut back).unwrap();
        assert_eq!(back, page(0), "past the end reads as zeros");
        file.sync().unwrap();
        file.write_page(2, &page(0xef)).unwrap();
        disk.crash();
        let err = file.read_page(1, &mut back).unwrap_err();
        assert!(err.to_string().contains("reading page 1 of sim://pages"), "{err}");
        let file = PageFile::open_on(open(&disk, "pages"), false, PAGE_SIZE as u64).unwrap();
        assert_eq!(file.size_pages(), 6);
        for (id, fill) in [(0, 0), (1, 0xab), (4, 0xcd)] {
            file.read_page(id, &mut back).unwrap();
            assert_eq!(back, page(fill), "page {id}");
        }
        file.read_page(2, &mut back).unwrap();
        assert!(back.iter().all(|&b| b == 0 || b == 0xef), "page 2 is old or new bytes");
        assert!(matches!(file.write_page(0, &page(1)), Err(Error::ReadOnly)));
        assert!(matches!(file.ensure_page(6), Err(Error::ReadOnly)));
        let short = vec![0u8; 100];
        assert!(file.write_page(0, &short).is_err());
    }

    #[test]
    fn a_full_simulated_disk_stays_recognisable_through_the_page_file() {
        let faults = SimFaults {
            seed: 8,
            capacity_bytes: Some(2 * PAGE_SIZE as u64),
            ..SimFaults::default()
        };
        let disk = SimDisk::with_faults(faults);
        let file = PageFile::open_on(open(&disk, "pages"), true, PAGE_SIZE as u64).unwrap();
        file.write_page(1, &page(1)).unwrap();
        let err = file.write_page(2, &page(2)).unwrap_err();
        let Error::Io { context, source } = &err else { panic!("{err}") };
        assert!(context.contains("sim://pages"), "{context}");
        assert_eq!(source.raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(file.size_pages(), 2);
        disk.fail_next_write();
        let err = file.write_page(0, &page(3)).unwrap_err();
        assert!(err.to_string().contains("writing page 0 of sim://pages"), "{err}");
        disk.fail_next_sync();
        let err = file.sync().unwrap_err();
        assert!(err.to_string().contains("syncing sim://pages"), "{err}");
    }
}
