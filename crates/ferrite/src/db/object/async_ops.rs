//! Object calls as futures, for tasks (`Db::spawn`): an object's data is read and written
//! through the worker's own ring (`sched::start_transfer`), every piece of a call in flight
//! at once and submitted with the worker's next batch, while the task yields; commits go
//! through the commit protocol's future (`Shared::commit`), which yields on the commit lock
//! and the log. Off a worker each call is its blocking twin.
//!
//! What still blocks a worker: the extent-map lookups of the objects tree (metadata, mostly
//! in memory), and the growth of the page file when an allocation passes its end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::format::{encode_stub, Extent, BLOCK};
use super::ops::{MapView, Stored};
use crate::db::{Shared, Tree};
use crate::error::{Error, PageId, Result};
use crate::io::{AlignedBlock, IoKind};
use crate::options::Durability;
use crate::sched::{on_worker, start_transfer, yield_now, Transfer};

/// Longest a task waits (yielding) for the merge thread to make room for its fragments
/// before it writes them anyway.
const ROOM_WAIT: Duration = Duration::from_secs(10);

/// One piece of a transfer in flight: where its bytes go in the caller's buffer, how many,
/// and the transfer.
struct Flight {
    at: usize,
    len: usize,
    transfer: Transfer,
}

impl Shared {
    /// Reads `bytes` from page `first` on (whole pages) into `out` through the worker's
    /// ring: one transfer per contiguous piece of the devices, all in flight together.
    fn start_reads(&self, first: PageId, at: usize, bytes: usize) -> Result<Vec<Flight>> {
        let file = self.pool.file();
        let mut flights = Vec::new();
        for (device, offset, piece_at, len) in file.run_pieces(first, bytes) {
            // (A read that moves fewer bytes fails below, so no stale byte is ever used.)
            let buf = AlignedBlock::reused(len);
            let transfer = start_transfer(IoKind::Read, device, offset, buf)
                .map_err(|_| Error::io("reading object data", not_on_worker()))?;
            flights.push(Flight { at: at + piece_at, len, transfer });
        }
        Ok(flights)
    }

    /// [`Shared::read_blocks`] through the worker's ring (every extent piece in flight at
    /// once); blocking off a worker.
    pub(crate) async fn read_blocks_async(
        &self,
        view: &MapView,
        first: u64,
        last: u64,
        out: &mut [u8],
    ) -> Result<()> {
        if !on_worker() {
            return self.read_blocks(view, first, last, out);
        }
        out.fill(0);
        let mut flights = Vec::new();
        for (page, at, bytes) in view.spans(first, last) {
            flights.extend(self.start_reads(page, at, bytes)?);
        }
        for flight in flights {
            let (buf, result) = flight.transfer.await;
            check_transfer(result, flight.len, "reading object data")?;
            out[flight.at..flight.at + flight.len].copy_from_slice(&buf.as_slice()[..flight.len]);
        }
        view.overlay(first, last, out);
        Ok(())
    }

    /// [`Shared::write_blocks`] through the worker's ring: new runs of pages, each written
    /// with the others in flight; returns the new extents and the runs.
    pub(crate) async fn write_blocks_async(
        self: &Arc<Self>,
        blocks: &[(u64, &[u8])],
    ) -> Result<(Vec<Extent>, Vec<(PageId, u64)>)> {
        if blocks.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let log = self.log()?;
        if self.limbo_wants_log() {
            // (As a future: the worker writes the log.)
            self.wait_durable(log.tail(), Durability::Sync).await?;
        }
        let pages = blocks.len() as u64;
        let runs = match self.object_space.allocate(&self.pool, pages, log.durable()) {
            // Room in limbo, waiting for the log: make it durable and try again.
            Err(Error::DatabaseFull { .. }) if self.limbo_waits_for_log(log) => {
                self.wait_durable(log.tail(), Durability::Sync).await?;
                self.object_space.allocate(&self.pool, pages, log.durable())?
            }
            runs => runs?,
        };
        let written = self.write_runs_async(blocks, &runs).await;
        match written {
            Ok(extents) => Ok((extents, runs)),
            Err(e) => {
                self.object_space.give_back(&runs);
                Err(e)
            }
        }
    }

    async fn write_runs_async(
        &self,
        blocks: &[(u64, &[u8])],
        runs: &[(PageId, u64)],
    ) -> Result<Vec<Extent>> {
        let file = self.pool.file();
        let mut extents: Vec<Extent> = Vec::new();
        let mut flights = Vec::new();
        let mut next = 0usize;
        // Queue every run; on an error (growing the file, say) queue no more, but still
        // wait for what is in flight below.
        let queued = (|| -> Result<()> {
            for &(first_page, pages) in runs {
                let buf = super::ops::fill_run(
                    &blocks[next..next + pages as usize],
                    first_page,
                    &mut extents,
                );
                next += pages as usize;
                file.ensure_page(first_page + pages - 1)?;
                let pieces = file.run_pieces(first_page, buf.len());
                if let [(device, offset, _, len)] = pieces[..] {
                    // (The common case: the run is one piece of one device, its buffer as is.)
                    let transfer = start_transfer(IoKind::Write, device, offset, buf)
                        .map_err(|_| Error::io("writing object data", not_on_worker()))?;
                    flights.push(Flight { at: 0, len, transfer });
                    continue;
                }
                for (device, offset, at, len) in pieces {
                    let mut piece = AlignedBlock::zeroed(len);
                    piece.as_mut_slice().copy_from_slice(&buf.as_slice()[at..at + len]);
                    let transfer = start_transfer(IoKind::Write, device, offset, piece)
                        .map_err(|_| Error::io("writing object data", not_on_worker()))?;
                    flights.push(Flight { at, len, transfer });
                }
            }
            Ok(())
        })();
        // Every transfer is waited for, even after one failed (their pages are given back
        // only when no write into them is in flight).
        let mut failed = queued.err();
        for flight in flights {
            let (_, result) = flight.transfer.await;
            if let Err(e) = check_transfer(result, flight.len, "writing object data") {
                failed.get_or_insert(e);
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        // Durable before any log flush carries the commit that points at them.
        self.object_space.wrote();
        Ok(extents)
    }

    /// [`Shared::help_merge_if_full`] for a task: yields while the merge thread makes room
    /// (at most `ROOM_WAIT`); without a merge thread the task writes on (the blocking
    /// writers run the merges then).
    async fn wait_for_room_async(self: &Arc<Self>) -> Result<()> {
        let space = &self.object_space;
        let over = || space.fragments().bytes > space.fragment_budget();
        let started = Instant::now();
        while over() && space.merge_thread() && started.elapsed() < ROOM_WAIT {
            space.wake_merger();
            yield_now().await;
            self.check_writable()?;
        }
        Ok(())
    }
}

fn not_on_worker() -> std::io::Error {
    std::io::Error::other("a transfer through a worker's ring started off its worker")
}

fn check_transfer(result: std::io::Result<usize>, want: usize, what: &str) -> Result<()> {
    match result {
        Ok(n) if n == want => Ok(()),
        Ok(n) => Err(Error::io(
            what,
            std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("a transfer of {want} bytes moved {n}"),
            ),
        )),
        Err(e) => Err(Error::io(what, e)),
    }
}

impl Tree {
    /// Reads `buf.len()` bytes at `offset` of object `id` (within its length), consistent
    /// with one moment of its map: on a worker through its ring, else (and under
    /// `block_on`, which hides a worker: `Tree::read_object`) with blocking reads.
    pub(crate) async fn read_object_async(
        &self,
        id: u64,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let shared = &self.shared;
        let _pin = shared.object_space.pin();
        let first = offset / BLOCK;
        let last = (offset + buf.len() as u64 - 1) / BLOCK;
        let view = {
            let _map = shared.object_space.map_read(id);
            shared.read_map(id, first, last)?
        };
        // A bounded span at a time (memory), each span's pieces in flight together.
        const SPAN: u64 = 256;
        let mut block = first;
        let mut data = Vec::new();
        while block <= last {
            let end = (block + SPAN - 1).min(last);
            data.resize(((end - block + 1) * BLOCK) as usize, 0);
            shared.read_blocks_async(&view, block, end, &mut data).await?;
            let span_start = block * BLOCK;
            let from = offset.max(span_start);
            let to = (offset + buf.len() as u64).min((end + 1) * BLOCK);
            buf[(from - offset) as usize..(to - offset) as usize]
                .copy_from_slice(&data[(from - span_start) as usize..(to - span_start) as usize]);
            block = end + 1;
        }
        Ok(())
    }

    /// The whole value of an object, as a future (`get_async` of an object's key).
    pub(crate) async fn read_whole_object_async(&self, id: u64, len: u64) -> Result<Vec<u8>> {
        let len = usize::try_from(len).map_err(|_| Error::ValueTooLarge {
            len: usize::MAX,
            max: super::MAX_OBJECT_LEN as usize,
        })?;
        let mut value = vec![0u8; len];
        self.read_object_async(id, 0, &mut value).await?;
        Ok(value)
    }

    /// [`Tree::read_at`] as a future: on a worker, the object's data is read through its
    /// ring while the task yields.
    pub async fn read_at_async(
        &self,
        key: impl AsRef<[u8]>,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<Option<usize>> {
        crate::db::in_task("Tree::read_at_async")?;
        self.read_at_bytes_async(key.as_ref(), offset, buf).await
    }

    /// [`Tree::read_at_async`] of a borrowed key.
    pub(crate) async fn read_at_bytes_async(
        &self,
        key: &[u8],
        offset: u64,
        buf: &mut [u8],
    ) -> Result<Option<usize>> {
        crate::db::check_key(key)?;
        loop {
            match self.stored_async(key).await? {
                Stored::Absent => return Ok(None),
                Stored::Plain(value) => {
                    let from = (offset.min(value.len() as u64)) as usize;
                    let n = buf.len().min(value.len() - from);
                    buf[..n].copy_from_slice(&value[from..from + n]);
                    return Ok(Some(n));
                }
                Stored::Object { id, len } => {
                    let n = buf.len().min(len.saturating_sub(offset) as usize);
                    let read = self.read_object_async(id, offset, &mut buf[..n]).await;
                    // Kept only if the key still holds this object (see `still_holds` in
                    // `Tree::get_with_async`): a put may have replaced it meanwhile.
                    let still = matches!(self.stored_async(key).await?,
                        Stored::Object { id: now, .. } if now == id);
                    if still {
                        return read.map(|()| Some(n));
                    }
                }
            }
        }
    }

    /// [`Tree::object_len`] as a future.
    pub async fn object_len_async(&self, key: impl AsRef<[u8]>) -> Result<Option<u64>> {
        crate::db::in_task("Tree::object_len_async")?;
        self.object_len_bytes_async(key.as_ref()).await
    }

    /// [`Tree::object_len_async`] of a borrowed key.
    pub(crate) async fn object_len_bytes_async(&self, key: &[u8]) -> Result<Option<u64>> {
        crate::db::check_key(key)?;
        Ok(match self.stored_async(key).await? {
            Stored::Absent => None,
            Stored::Plain(value) => Some(value.len() as u64),
            Stored::Object { len, .. } => Some(len),
        })
    }

    /// [`Tree::write_at`] as a future, for tasks: whole blocks are written through the
    /// worker's ring, the commit yields on the commit lock and the log. (Each call is its
    /// own commit: the group commit of the blocking writers is theirs.) Off a worker it is
    /// the blocking call.
    pub async fn write_at_async(
        &self,
        key: impl AsRef<[u8]>,
        offset: u64,
        bytes: impl AsRef<[u8]>,
    ) -> Result<()> {
        crate::db::in_task("Tree::write_at_async")?;
        let (key, bytes) = (key.as_ref(), bytes.as_ref());
        if !on_worker() {
            return self.write_at(key, offset, bytes);
        }
        self.write_pieces_async(key, offset, bytes, false).await.map(|_| ())
    }

    /// [`Tree::append`] as a future; see [`Tree::write_at_async`].
    pub async fn append_async(
        &self,
        key: impl AsRef<[u8]>,
        bytes: impl AsRef<[u8]>,
    ) -> Result<u64> {
        crate::db::in_task("Tree::append_async")?;
        let (key, bytes) = (key.as_ref(), bytes.as_ref());
        if !on_worker() {
            return self.append(key, bytes);
        }
        self.write_pieces_async(key, 0, bytes, true).await
    }

    /// [`Tree::put_async`] of a value that must be an object: its data written into a new
    /// object (through the worker's ring), then one commit puts the object's stub as the
    /// key's value and frees what the key held.
    pub(crate) async fn put_object_async(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let shared = &self.shared;
        match on_worker() {
            // (A task cannot make the objects tree: making a tree is a blocking commit.)
            true => {
                shared.objects_tree(false)?.ok_or_else(|| Error::NotSupported {
                    reason: "the first object of a database is written with the blocking API \
                             or made ready with Db::ready_objects (it makes the database's \
                             objects tree); after that, tasks write objects with the async calls"
                        .into(),
                })?;
            }
            false => {
                shared.objects_tree(true)?;
            }
        }
        let prepared = shared.prepare_object_async(value).await?;
        let outcome = shared
            .commit(shared.durability, async || shared.apply_prepared(self, key, &prepared).await)
            .await;
        if outcome.is_err() {
            shared.abandon_prepared(&prepared);
        }
        outcome
    }

    async fn write_pieces_async(
        &self,
        key: &[u8],
        offset: u64,
        bytes: &[u8],
        at_end: bool,
    ) -> Result<u64> {
        let shared = &self.shared;
        shared.check_writable()?;
        crate::db::check_key(key)?;
        // (A task cannot make the objects tree: making a tree is a blocking commit.)
        let objects = shared.objects_tree(false)?.ok_or_else(|| Error::NotSupported {
            reason: "the first object of a database is written with the blocking API (it \
                     makes the database's objects tree); after that, tasks write objects \
                     with the async calls"
                .into(),
        })?;
        shared.wait_for_room_async().await?;
        loop {
            let stored = self.stored_async(key).await?;
            let target = shared.write_target(&stored, offset, bytes.len() as u64, at_end)?;
            let (id, old_len, new_len) = (target.id, target.old_len, target.new_len);
            let pieces = target.pieces(bytes);
            let (mut change, whole) = self.plan_fragments(&pieces);
            if let (Some(first), Some(last)) = (whole.first(), whole.last()) {
                let (first, last) = (first.0, last.0);
                let extents = shared.read_extents(id, first, last)?;
                let refs: Vec<(u64, &[u8])> = whole.iter().map(|(b, d)| (*b, &d[..])).collect();
                let (new, runs) = shared.write_blocks_async(&refs).await?;
                let view = MapView { extents, ..MapView::default() };
                Shared::replace_blocks(&view, &new, &mut change);
                change.new_runs = runs;
                change.planned_on.push((first, last, view.extents));
            }
            let stub = encode_stub(id, new_len);
            let stub = (target.base.is_some() || new_len != old_len).then_some(&stub[..]);
            let durability = shared.durability;
            let outcome = shared
                .commit(durability, async || {
                    self.apply_if_current(&objects, key, &stored, id, &change, stub).await
                })
                .await;
            match outcome {
                Ok(true) => return Ok(new_len),
                Ok(false) => shared.object_space.give_back(&change.new_runs),
                Err(e) => {
                    if shared.log()?.check().is_ok() {
                        shared.object_space.give_back(&change.new_runs);
                    }
                    return Err(e);
                }
            }
        }
    }
}
