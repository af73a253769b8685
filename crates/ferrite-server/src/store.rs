//! What each request does to the items (`item.rs`) in the server's tree, run by a
//! connection's task with the engine's async calls, its replies appended to the
//! connection's output. Every command that writes an item holds the key's lock
//! (`locks.rs`): those that read it first (`add`, `replace`, `append`, `prepend`, `cas`,
//! `incr`, `decr`, `touch`, `gat`, and their meta forms) from the read to the write, so that
//! no other write (a `set` or `delete` included) comes in between.
//!
//! Expired items are misses (removed when next touched by a write); `flush_all` makes every
//! item stored before it a miss: items carry their cas, which grows with every change, and
//! an item whose cas is not above the flush's mark is gone (the mark is kept in the tree, so
//! a restart keeps it).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use ferrite::{Db, Tree, ValueSlices, WriteBatch};

use crate::item::{self, Header};
use crate::locks::KeyLocks;
use crate::protocol::{
    write_end, write_error, write_meta, write_meta_debug, write_meta_noop, write_number,
    write_stat, write_status, write_value, write_value_line, write_version, GetCommand, Key,
    MetaCommand, MetaDebug, MetaFlags, MetaItem, MetaReply, MetaStatus, ProtocolError, Request,
    Status, StoreCommand,
};
use crate::slices::SliceCache;
use crate::sweep::Sweeper;

/// The key of the flush mark in the tree (a key no client can send: it holds a control
/// character, which the decoder refuses in keys).
const FLUSH_MARK_KEY: &[u8] = b"\x00ferrite:flush";

/// A `get` hit longer than this is sent in slices of this many bytes, each read while the
/// one before it is sent: a connection never holds more than two of them.
pub const SLICE_BYTES: usize = 256 << 10;

/// Of a hit sent in slices, what is read while the request runs: its header and the start
/// of its data, one page.
const HEAD_BYTES: usize = 4096;

/// Past this many bytes of reply, every further hit of a multi-get longer than `HEAD_BYTES`
/// is sent in slices too: a `get` of a hundred keys holds no hundred values.
const REPLY_WHOLE_MAX: usize = 1 << 20;

/// A hit of a `get` whose value goes out in slices (`SLICE_BYTES`): its first page is in
/// the reply already, and the rest of it is sent at `at` in the reply's bytes (before the
/// `\r\n` that ends it), from `slices`, before anything after it runs.
#[derive(Debug)]
pub struct PendingValue {
    /// Where in the reply the rest of the value goes.
    pub at: usize,
    /// The value, read up to the rest.
    pub slices: ValueSlices,
}

/// What a live item's value is, for a `get`: whole, or its first page and a reader of
/// the rest.
enum Hit {
    Whole(Vec<u8>),
    Sliced { first: Vec<u8>, slices: ValueSlices },
}

/// The version `version` reports: memcached's protocol, Ferrite's build.
pub const VERSION: &str = concat!("1.6.0-ferrite-", env!("CARGO_PKG_VERSION"));

/// Counters `stats` reports.
#[derive(Debug, Default)]
pub struct Counters {
    pub cmd_get: AtomicU64,
    pub cmd_set: AtomicU64,
    pub cmd_touch: AtomicU64,
    pub cmd_flush: AtomicU64,
    pub get_hits: AtomicU64,
    pub get_misses: AtomicU64,
    pub get_expired: AtomicU64,
    pub delete_hits: AtomicU64,
    pub delete_misses: AtomicU64,
    pub incr_hits: AtomicU64,
    pub incr_misses: AtomicU64,
    pub decr_hits: AtomicU64,
    pub decr_misses: AtomicU64,
    pub cas_hits: AtomicU64,
    pub cas_misses: AtomicU64,
    pub cas_badval: AtomicU64,
    pub touch_hits: AtomicU64,
    pub touch_misses: AtomicU64,
    pub curr_connections: AtomicU64,
    pub total_connections: AtomicU64,
    pub rejected_connections: AtomicU64,
    /// Accepts that failed (out of descriptors, say), each followed by a pause.
    pub listen_disabled_num: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    /// Authentication attempts (`set` on a connection not authenticated yet), and failed
    /// ones.
    pub auth_cmds: AtomicU64,
    pub auth_errors: AtomicU64,
    /// `backup` commands that made a backup, and those that failed.
    pub backups: AtomicU64,
    pub backup_failures: AtomicU64,
}

impl Counters {
    /// `stats reset`: every counter back to zero but the connections open.
    fn reset(&self) {
        for counter in [
            &self.cmd_get,
            &self.cmd_set,
            &self.cmd_touch,
            &self.cmd_flush,
            &self.get_hits,
            &self.get_misses,
            &self.get_expired,
            &self.delete_hits,
            &self.delete_misses,
            &self.incr_hits,
            &self.incr_misses,
            &self.decr_hits,
            &self.decr_misses,
            &self.cas_hits,
            &self.cas_misses,
            &self.cas_badval,
            &self.touch_hits,
            &self.touch_misses,
            &self.total_connections,
            &self.rejected_connections,
            &self.listen_disabled_num,
            &self.bytes_read,
            &self.bytes_written,
            &self.auth_cmds,
            &self.auth_errors,
            &self.backups,
            &self.backup_failures,
        ] {
            counter.store(0, Ordering::Relaxed);
        }
    }
}

/// The items of one server.
#[derive(Debug)]
pub struct Store {
    pub(crate) tree: Tree,
    pub(crate) locks: KeyLocks,
    /// The next cas unique.
    next_cas: AtomicU64,
    /// Items whose cas is at most this are flushed.
    flushed_up_to: AtomicU64,
    /// A `flush_all <delay>` due at this Unix second (0: none).
    flush_due: Mutex<u32>,
    pub counters: Counters,
    /// Eviction and the expiry sweep (`sweep.rs`).
    pub sweeper: Sweeper,
    /// Slices of large items shared between GETs (`slices.rs`).
    pub slices: SliceCache,
    started: u32,
    /// What `stats settings` reports.
    pub settings: Vec<(&'static str, String)>,
    /// The database, when it has a second cache tier, for `stats` (weak: the store does not
    /// keep the database open past the server).
    pub tier: Option<std::sync::Weak<Db>>,
}

fn increment(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// An engine failure as the client sees it: a full store is memcached's "out of memory"
/// (nothing was stored); anything else says what failed.
fn server_error(out: &mut Vec<u8>, e: &ferrite::Error) {
    if let ferrite::Error::DatabaseFull { .. } = e {
        write_error(out, ProtocolError::OutOfMemoryStoring);
        return;
    }
    out.extend_from_slice(b"SERVER_ERROR ");
    let text = e.to_string().replace(['\r', '\n'], " ");
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(b"\r\n");
}

impl Store {
    /// The items of `tree` (opened blocking, off the workers: reads the flush mark).
    pub fn open(
        tree: Tree,
        sweeper: Sweeper,
        settings: Vec<(&'static str, String)>,
    ) -> ferrite::Result<Store> {
        let flushed_up_to = match tree.get(FLUSH_MARK_KEY)? {
            Some(mark) if mark.len() == 8 => u64::from_le_bytes(mark[..8].try_into().unwrap()),
            _ => 0,
        };
        // Cas uniques grow across restarts: they start from the clock (microseconds), above
        // any a run before this one could have handed out at a million changes a second.
        let clock = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        Ok(Store {
            tree,
            locks: KeyLocks::default(),
            next_cas: AtomicU64::new(clock.max(flushed_up_to + 1)),
            flushed_up_to: AtomicU64::new(flushed_up_to),
            flush_due: Mutex::new(0),
            counters: Counters::default(),
            sweeper,
            slices: SliceCache::default(),
            started: item::now(),
            settings,
            tier: None,
        })
    }

    /// Whether an item of cas `cas` is gone by a `flush_all`.
    pub(crate) fn flushed(&self, cas: u64) -> bool {
        cas <= self.flushed_up_to.load(Ordering::Relaxed)
    }

    fn new_cas(&self) -> u64 {
        self.next_cas.fetch_add(1, Ordering::Relaxed)
    }

    /// Runs a delayed flush whose time came.
    async fn flush_if_due(&self, now: u32) -> ferrite::Result<()> {
        let due = {
            let mut due = self.flush_due.lock().unwrap();
            if *due == 0 || *due > now {
                return Ok(());
            }
            std::mem::take(&mut *due)
        };
        let _ = due;
        self.flush_now().await
    }

    async fn flush_now(&self) -> ferrite::Result<()> {
        let mark = self.new_cas();
        self.tree.put_async(FLUSH_MARK_KEY, &mark.to_le_bytes()).await?;
        self.flushed_up_to.fetch_max(mark, Ordering::Relaxed);
        self.sweeper.flushed();
        Ok(())
    }

    /// The live item of `key` at `now`: its header and stored value; `None` for a miss (an
    /// absent, expired or flushed key).
    async fn live(&self, key: &[u8], now: u32) -> ferrite::Result<Option<(Header, Vec<u8>)>> {
        let Some(value) = self.tree.get_async(key).await? else { return Ok(None) };
        Ok(self.live_header(key, &value, now).map(|header| (header, value)))
    }

    /// The header of `key`'s stored value that begins with `stored`, if the item is live at
    /// `now` (not expired, not flushed); a live item counts as referenced for the sweeper.
    fn live_header(&self, key: &[u8], stored: &[u8], now: u32) -> Option<Header> {
        let (header, _) = item::decode(stored)?;
        if header.expired(now) {
            increment(&self.counters.get_expired);
            return None;
        }
        if self.flushed(header.cas) {
            return None;
        }
        self.sweeper.referenced(key);
        Some(header)
    }

    /// Stores the item. A database that is full makes a cache-mode server evict (a forced
    /// round of the sweeper) and try again, twice at most.
    async fn put(&self, key: &[u8], header: &Header, data: &[u8]) -> ferrite::Result<()> {
        let value = item::encode(header, data);
        let mut outcome = self.tree.put_async(key, &value).await;
        for _ in 0..2 {
            if !matches!(outcome, Err(ferrite::Error::DatabaseFull { .. })) {
                break;
            }
            if !self.sweeper.make_room().await {
                break;
            }
            outcome = self.tree.put_async(key, &value).await;
        }
        if outcome.is_ok() {
            self.sweeper.wrote(key, header.expires != 0);
        }
        outcome
    }

    /// Executes `request`, appending its reply to `out`. Returns false when the connection
    /// must close (`quit`).
    pub async fn execute(&self, request: &Request<'_>, out: &mut Vec<u8>) -> bool {
        self.run(request, out, None).await
    }

    /// [`Store::execute`], with the hits of a `get` or `gets` longer than `SLICE_BYTES`
    /// left in `streams` to be sent in slices (see [`PendingValue`]) instead of read whole.
    pub async fn execute_streaming(
        &self,
        request: &Request<'_>,
        out: &mut Vec<u8>,
        streams: &mut Vec<PendingValue>,
    ) -> bool {
        self.run(request, out, Some(streams)).await
    }

    async fn run(
        &self,
        request: &Request<'_>,
        out: &mut Vec<u8>,
        streams: Option<&mut Vec<PendingValue>>,
    ) -> bool {
        let now = item::now();
        if let Err(e) = self.flush_if_due(now).await {
            server_error(out, &e);
            return true;
        }
        let outcome = match request {
            Request::Quit => return false,
            Request::Get { command, exptime, keys } => {
                self.get(*command, *exptime, *keys, now, out, streams).await
            }
            Request::Store { command, key, flags, exptime, cas, data, noreply } => {
                let status = self.store(*command, key, *flags, *exptime, *cas, data, now).await;
                match status {
                    Ok(status) if !noreply => {
                        write_status(out, status);
                        Ok(())
                    }
                    Ok(_) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            Request::Arithmetic { incr, key, delta, noreply } => {
                self.arithmetic(*incr, key, *delta, *noreply, now, out).await
            }
            Request::Touch { key, exptime, noreply } => {
                increment(&self.counters.cmd_touch);
                match self.touch(key, i64::from(*exptime), now).await.map(|t| t.is_some()) {
                    Ok(found) => {
                        if !noreply {
                            write_status(
                                out,
                                if found { Status::Touched } else { Status::NotFound },
                            );
                        }
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            }
            Request::Delete { key, noreply } => match self.delete(key, now).await {
                Ok(found) => {
                    if !noreply {
                        write_status(out, if found { Status::Deleted } else { Status::NotFound });
                    }
                    Ok(())
                }
                Err(e) => Err(e),
            },
            Request::FlushAll { delay, noreply } => {
                increment(&self.counters.cmd_flush);
                let outcome = if *delay > 0 {
                    *self.flush_due.lock().unwrap() = item::expiry(i64::from(*delay), now);
                    Ok(())
                } else {
                    self.flush_now().await
                };
                if outcome.is_ok() && !noreply {
                    write_status(out, Status::Ok);
                }
                outcome
            }
            Request::Stats { args } => {
                self.stats(args, now, out);
                Ok(())
            }
            Request::Version => {
                write_version(out, VERSION);
                Ok(())
            }
            Request::Verbosity { noreply, .. } => {
                if !noreply {
                    write_status(out, Status::Ok);
                }
                Ok(())
            }
            Request::MetaNoop => {
                write_meta_noop(out);
                Ok(())
            }
            Request::MetaGet { key, flags } => self.meta_get(key, flags, now, out).await,
            Request::MetaSet { key, flags, data } => {
                self.meta_set(key, flags, data, now, out).await
            }
            Request::MetaDelete { key, flags } => self.meta_delete(key, flags, now, out).await,
            Request::MetaArithmetic { key, flags } => {
                self.meta_arithmetic(key, flags, now, out).await
            }
            Request::Backup { .. } => {
                // The server runs backups (it has the database); a store alone cannot.
                write_error(out, ProtocolError::UnknownCommand);
                Ok(())
            }
            Request::MetaDebug { key } => {
                match self.live(key.as_bytes(), now).await {
                    Ok(Some((header, value))) => {
                        let debug = MetaDebug {
                            exp: header.ttl_remaining(now).map_or(-1, i64::from),
                            la: 0,
                            cas: header.cas,
                            fetched: false,
                            cls: 1,
                            size: (value.len() - item::HEADER_BYTES) as u64,
                        };
                        write_meta_debug(out, key, &debug);
                    }
                    Ok(None) => out.extend_from_slice(b"EN\r\n"),
                    Err(e) => server_error(out, &e),
                }
                Ok(())
            }
        };
        if let Err(e) = outcome {
            server_error(out, &e);
        }
        true
    }

    async fn get(
        &self,
        command: GetCommand,
        exptime: Option<i32>,
        keys: crate::protocol::Keys<'_>,
        now: u32,
        out: &mut Vec<u8>,
        mut streams: Option<&mut Vec<PendingValue>>,
    ) -> ferrite::Result<()> {
        for key in keys {
            increment(&self.counters.cmd_get);
            let found = match (exptime, streams.is_some()) {
                // gat/gats: the touch and the read under the key's lock.
                (Some(exptime), _) => {
                    increment(&self.counters.cmd_touch);
                    self.touch(key, i64::from(exptime), now).await?.map(|(h, v)| (h, Hit::Whole(v)))
                }
                (None, true) => {
                    let whole_up_to = if out.len() < REPLY_WHOLE_MAX { SLICE_BYTES } else { 0 };
                    self.live_sliced(key, now, whole_up_to).await?
                }
                (None, false) => self.live(key, now).await?.map(|(h, v)| (h, Hit::Whole(v))),
            };
            let Some((header, hit)) = found else {
                increment(&self.counters.get_misses);
                continue;
            };
            increment(&self.counters.get_hits);
            let cas = command.returns_cas().then_some(header.cas);
            match hit {
                Hit::Whole(value) => {
                    write_value(out, key, header.flags, &value[item::HEADER_BYTES..], cas)
                }
                Hit::Sliced { first, slices } => {
                    let len = slices.len() - item::HEADER_BYTES as u64;
                    write_value_line(out, key, header.flags, len, cas);
                    out.extend_from_slice(&first[item::HEADER_BYTES..]);
                    let pending = PendingValue { at: out.len(), slices };
                    streams.as_mut().expect("sliced only with streams").push(pending);
                    out.extend_from_slice(b"\r\n");
                }
            }
        }
        write_end(out);
        Ok(())
    }

    /// The live item of `key` at `now`, as [`Store::live`], but a value longer than
    /// `whole_up_to` bytes is read only up to `HEAD_BYTES`: the rest is left to a reader.
    async fn live_sliced(
        &self,
        key: &[u8],
        now: u32,
        whole_up_to: usize,
    ) -> ferrite::Result<Option<(Header, Hit)>> {
        let (first, slices) = loop {
            let Some(mut slices) = self.tree.value_slices_async(key).await? else {
                return Ok(None);
            };
            let len = slices.len();
            let head = if len <= whole_up_to as u64 { len } else { len.min(HEAD_BYTES as u64) };
            let mut first = vec![0u8; head as usize];
            // `None`: replaced while it was read; read the new one.
            if self.slices.read(&mut slices, &mut first).await?.is_some() {
                break (first, slices);
            }
        };
        let Some(header) = self.live_header(key, &first, now) else { return Ok(None) };
        let hit = if slices.position() == slices.len() {
            Hit::Whole(first)
        } else {
            Hit::Sliced { first, slices }
        };
        Ok(Some((header, hit)))
    }

    #[allow(clippy::too_many_arguments)]
    async fn store(
        &self,
        command: StoreCommand,
        key: &[u8],
        flags: u32,
        exptime: i32,
        cas: Option<u64>,
        data: &[u8],
        now: u32,
    ) -> ferrite::Result<Status> {
        increment(&self.counters.cmd_set);
        let expires = item::expiry(i64::from(exptime), now);
        let header = |cas| Header { flags, expires, cas };
        // A set takes the key's lock too: a `cas` or `append` between its read and its write
        // must not overwrite a set that came in between.
        let _guard = self.locks.lock(key).await;
        if command == StoreCommand::Set {
            self.put(key, &header(self.new_cas()), data).await?;
            return Ok(Status::Stored);
        }
        let old = self.live(key, now).await?;
        let status = match (command, old) {
            (StoreCommand::Add, Some(_)) => Status::NotStored,
            (StoreCommand::Add, None) => {
                self.put(key, &header(self.new_cas()), data).await?;
                Status::Stored
            }
            (StoreCommand::Replace, None) => Status::NotStored,
            (StoreCommand::Replace, Some(_)) => {
                self.put(key, &header(self.new_cas()), data).await?;
                Status::Stored
            }
            (StoreCommand::Append | StoreCommand::Prepend, None) => Status::NotStored,
            (StoreCommand::Append | StoreCommand::Prepend, Some((old, value))) => {
                // The item keeps its flags and expiry (memcached ignores the new ones).
                let old_data = &value[item::HEADER_BYTES..];
                let mut joined = Vec::with_capacity(old_data.len() + data.len());
                if command == StoreCommand::Append {
                    joined.extend_from_slice(old_data);
                    joined.extend_from_slice(data);
                } else {
                    joined.extend_from_slice(data);
                    joined.extend_from_slice(old_data);
                }
                let header = Header { cas: self.new_cas(), ..old };
                self.put(key, &header, &joined).await?;
                Status::Stored
            }
            (StoreCommand::Cas, None) => {
                increment(&self.counters.cas_misses);
                Status::NotFound
            }
            (StoreCommand::Cas, Some((old, _))) => {
                if Some(old.cas) != cas {
                    increment(&self.counters.cas_badval);
                    Status::Exists
                } else {
                    increment(&self.counters.cas_hits);
                    self.put(key, &header(self.new_cas()), data).await?;
                    Status::Stored
                }
            }
            (StoreCommand::Set, _) => unreachable!("set took the path above"),
        };
        Ok(status)
    }

    /// Whether `request` may join a group of sets committed together ([`Store::set_many`]):
    /// a plain `set` of an item that fits in a leaf (a larger one is an object, written by
    /// its own call).
    pub fn groups(request: &Request<'_>) -> bool {
        matches!(request, Request::Store { command: StoreCommand::Set, data, .. }
            if item::HEADER_BYTES + data.len() <= ferrite::MAX_VALUE_LEN)
    }

    /// Runs pipelined `set`s (each [`Store::groups`]) as one commit: their keys' locks taken
    /// together, one write batch, one wait for the log; the replies as each would have
    /// given. A full database sends them one by one instead (each then makes room as
    /// `put` does). (A batch reads each leaf it changes first: a put alone may leave its
    /// change in the change buffer instead, so a single set is run alone.)
    pub async fn set_many(&self, db: &Db, sets: &[Request<'_>], out: &mut Vec<u8>) {
        if let [one] = sets {
            // One alone goes the usual way: a put may wait in the change buffer for its leaf,
            // where a batch reads the leaf first.
            let _ = self.execute(one, out).await;
            return;
        }
        let now = item::now();
        if let Err(e) = self.flush_if_due(now).await {
            for _ in sets {
                server_error(out, &e);
            }
            return;
        }
        fn fields<'r>(request: &Request<'r>) -> (&'r [u8], u32, i32, &'r [u8], bool) {
            match *request {
                Request::Store {
                    command: StoreCommand::Set,
                    key,
                    flags,
                    exptime,
                    data,
                    noreply,
                    ..
                } => (key, flags, exptime, data, noreply),
                _ => unreachable!("only sets are grouped"),
            }
        }
        let outcome = {
            let _guards = self.locks.lock_all(sets.iter().map(|r| fields(r).0)).await;
            let mut batch = WriteBatch::new();
            let mut expiring = Vec::with_capacity(sets.len());
            for request in sets {
                let (key, flags, exptime, data, _) = fields(request);
                increment(&self.counters.cmd_set);
                let header = Header {
                    flags,
                    expires: item::expiry(i64::from(exptime), now),
                    cas: self.new_cas(),
                };
                batch.put(&self.tree, key, item::encode(&header, data));
                expiring.push(header.expires != 0);
            }
            db.write_async(&batch).await.map(|()| expiring)
        };
        match outcome {
            Ok(expiring) => {
                for (request, expires) in sets.iter().zip(expiring) {
                    let (key, _, _, _, noreply) = fields(request);
                    self.sweeper.wrote(key, expires);
                    if !noreply {
                        write_status(out, Status::Stored);
                    }
                }
            }
            Err(ferrite::Error::DatabaseFull { .. }) => {
                // (The counts were taken: each `store` below counts its set again.)
                self.counters.cmd_set.fetch_sub(sets.len() as u64, Ordering::Relaxed);
                for request in sets {
                    let _ = self.execute(request, out).await;
                }
            }
            Err(e) => {
                for request in sets {
                    if !fields(request).4 {
                        server_error(out, &e);
                    }
                }
            }
        }
    }

    /// incr/decr: `Ok(Some(new value))`, `Ok(None)` for a miss, or the error to reply.
    async fn add_delta(
        &self,
        key: &[u8],
        incr: bool,
        delta: u64,
        now: u32,
    ) -> ferrite::Result<Result<Option<(u64, Header)>, ProtocolError>> {
        let _guard = self.locks.lock(key).await;
        let Some((old, value)) = self.live(key, now).await? else { return Ok(Ok(None)) };
        let data = &value[item::HEADER_BYTES..];
        // memcached reads the value as a decimal number (leading spaces allowed, trailing
        // spaces from an earlier in-place decrement too).
        let text = std::str::from_utf8(data).unwrap_or("").trim_matches(' ');
        let Ok(number) = text.parse::<u64>() else {
            return Ok(Err(ProtocolError::NonNumericValue));
        };
        let new = if incr { number.wrapping_add(delta) } else { number.saturating_sub(delta) };
        let header = Header { cas: self.new_cas(), ..old };
        self.put(key, &header, new.to_string().as_bytes()).await?;
        Ok(Ok(Some((new, header))))
    }

    async fn arithmetic(
        &self,
        incr: bool,
        key: &[u8],
        delta: u64,
        noreply: bool,
        now: u32,
        out: &mut Vec<u8>,
    ) -> ferrite::Result<()> {
        let (hits, misses) = match incr {
            true => (&self.counters.incr_hits, &self.counters.incr_misses),
            false => (&self.counters.decr_hits, &self.counters.decr_misses),
        };
        match self.add_delta(key, incr, delta, now).await? {
            Ok(Some((number, _))) => {
                increment(hits);
                if !noreply {
                    write_number(out, number);
                }
            }
            Ok(None) => {
                increment(misses);
                if !noreply {
                    write_status(out, Status::NotFound);
                }
            }
            Err(error) => {
                if !noreply {
                    write_error(out, error);
                }
            }
        }
        Ok(())
    }

    /// Gives the live item of `key` a new expiry (`exptime` as a client sends it) under
    /// the key's lock; returns the item, touched, or `None` for a miss.
    async fn touch(
        &self,
        key: &[u8],
        exptime: i64,
        now: u32,
    ) -> ferrite::Result<Option<(Header, Vec<u8>)>> {
        let _guard = self.locks.lock(key).await;
        match self.live(key, now).await? {
            Some((mut header, value)) => {
                header.expires = item::expiry(exptime, now);
                self.put(key, &header, &value[item::HEADER_BYTES..]).await?;
                increment(&self.counters.touch_hits);
                Ok(Some((header, value)))
            }
            None => {
                increment(&self.counters.touch_misses);
                Ok(None)
            }
        }
    }

    async fn delete(&self, key: &[u8], now: u32) -> ferrite::Result<bool> {
        let _guard = self.locks.lock(key).await;
        let live = self.live(key, now).await?.is_some();
        // (An expired or flushed item is removed too, and still reported missing.)
        let removed = self.tree.delete_async(key).await?;
        let found = live && removed;
        increment(if found { &self.counters.delete_hits } else { &self.counters.delete_misses });
        Ok(found)
    }

    fn stats(&self, args: &[u8], now: u32, out: &mut Vec<u8>) {
        let c = &self.counters;
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let subcommand = args.split(|&b| b == b' ').find(|t| !t.is_empty()).unwrap_or(b"");
        match subcommand {
            b"reset" => {
                c.reset();
                out.extend_from_slice(b"RESET\r\n");
                return;
            }
            // (memcached started with -X answers so: Ferrite keeps no per-prefix stats.)
            b"detail" | b"cachedump" => {
                let name = String::from_utf8_lossy(subcommand);
                out.extend_from_slice(
                    format!("CLIENT_ERROR stats {name} not allowed\r\n").as_bytes(),
                );
                return;
            }
            b"" | b"settings" | b"items" | b"slabs" | b"sizes" | b"conns" => {}
            _ => {
                write_error(out, ProtocolError::UnknownCommand);
                return;
            }
        }
        match subcommand {
            b"" => {
                write_stat(out, "pid", std::process::id());
                write_stat(out, "uptime", now.saturating_sub(self.started));
                write_stat(out, "time", now);
                write_stat(out, "version", VERSION);
                write_stat(out, "pointer_size", usize::BITS);
                write_stat(out, "curr_connections", get(&c.curr_connections));
                write_stat(out, "total_connections", get(&c.total_connections));
                write_stat(out, "rejected_connections", get(&c.rejected_connections));
                write_stat(out, "listen_disabled_num", get(&c.listen_disabled_num));
                let tier = self.tier.as_ref().and_then(|db| db.upgrade()?.pool().stats().tier);
                if let Some(tier) = tier {
                    write_stat(out, "tier_slots", tier.slots);
                    write_stat(out, "tier_lookups", tier.lookups);
                    write_stat(out, "tier_hits", tier.hits);
                    write_stat(out, "tier_inserts", tier.inserts);
                    write_stat(out, "tier_invalidations", tier.invalidations);
                    write_stat(out, "tier_evictions", tier.evictions);
                    write_stat(out, "tier_refused", tier.refused);
                    write_stat(out, "tier_filtered", tier.filtered);
                    write_stat(out, "tier_bytes_written", tier.bytes_written);
                    write_stat(out, "tier_obp", format!("{:.3}", tier.obp));
                    write_stat(out, "tier_obp_max", format!("{:.3}", tier.obp_max));
                    write_stat(out, "tier_obp_windows", tier.windows);
                    write_stat(out, "tier_obp_windows_over", tier.windows_over);
                    write_stat(out, "tier_admitting", u8::from(tier.admitting));
                }
                for (name, counter) in [
                    ("cmd_get", &c.cmd_get),
                    ("cmd_set", &c.cmd_set),
                    ("cmd_flush", &c.cmd_flush),
                    ("cmd_touch", &c.cmd_touch),
                    ("get_hits", &c.get_hits),
                    ("get_misses", &c.get_misses),
                    ("get_expired", &c.get_expired),
                    ("delete_misses", &c.delete_misses),
                    ("delete_hits", &c.delete_hits),
                    ("incr_misses", &c.incr_misses),
                    ("incr_hits", &c.incr_hits),
                    ("decr_misses", &c.decr_misses),
                    ("decr_hits", &c.decr_hits),
                    ("cas_misses", &c.cas_misses),
                    ("cas_hits", &c.cas_hits),
                    ("cas_badval", &c.cas_badval),
                    ("touch_hits", &c.touch_hits),
                    ("touch_misses", &c.touch_misses),
                    ("evictions", &self.sweeper.evictions),
                    ("reclaimed", &self.sweeper.reclaimed),
                    ("auth_cmds", &c.auth_cmds),
                    ("auth_errors", &c.auth_errors),
                    ("backups", &c.backups),
                    ("backup_failures", &c.backup_failures),
                    ("bytes_read", &c.bytes_read),
                    ("bytes_written", &c.bytes_written),
                    ("large_slice_reads", &self.slices.reads),
                    ("large_slice_shares", &self.slices.shared),
                ] {
                    write_stat(out, name, get(counter));
                }
            }
            b"settings" => {
                for (name, value) in &self.settings {
                    write_stat(out, name, value);
                }
            }
            // Items and slabs are memcached's memory classes: Ferrite has none to list.
            _ => {}
        }
        write_end(out);
    }

    async fn meta_get(
        &self,
        key: &Key<'_>,
        flags: &MetaFlags<'_>,
        now: u32,
        out: &mut Vec<u8>,
    ) -> ferrite::Result<()> {
        increment(&self.counters.cmd_get);
        let bytes = key.as_bytes();
        let found = match flags.ttl {
            Some(ttl) => self.touch(bytes, i64::from(ttl), now).await?,
            None => self.live(bytes, now).await?,
        };
        let reply = |status, item: Option<&MetaItem>, value: Option<&[u8]>, out: &mut Vec<u8>| {
            let reply = MetaReply { command: MetaCommand::Get, status, key, flags, item, value };
            write_meta(out, &reply);
        };
        match found {
            Some((header, value)) => {
                increment(&self.counters.get_hits);
                let data = &value[item::HEADER_BYTES..];
                let meta = meta_item(&header, data.len(), now);
                match flags.return_value {
                    true => reply(MetaStatus::Va, Some(&meta), Some(data), out),
                    false => reply(MetaStatus::Hd, Some(&meta), None, out),
                }
            }
            None => {
                increment(&self.counters.get_misses);
                reply(MetaStatus::En, None, None, out);
            }
        }
        Ok(())
    }

    async fn meta_set(
        &self,
        key: &Key<'_>,
        flags: &MetaFlags<'_>,
        data: &[u8],
        now: u32,
        out: &mut Vec<u8>,
    ) -> ferrite::Result<()> {
        increment(&self.counters.cmd_set);
        let bytes = key.as_bytes();
        let _guard = self.locks.lock(bytes).await;
        let old = self.live(bytes, now).await?;
        let expires = flags.ttl.map_or(0, |ttl| item::expiry(i64::from(ttl), now));
        let client_flags = flags.client_flags.unwrap_or(0);
        let mode = flags.mode.unwrap_or(b'S');
        let cas_ok = match (flags.compare_cas, &old) {
            (Some(want), Some((header, _))) => header.cas == want,
            (Some(_), None) => false,
            (None, _) => true,
        };
        let mut written = None;
        let status = if !cas_ok {
            match old {
                Some(_) => MetaStatus::Ex,
                None => MetaStatus::Nf,
            }
        } else {
            let cas = flags.explicit_cas.unwrap_or_else(|| self.new_cas());
            let new = match (mode, &old) {
                (b'E', Some(_)) | (b'R', None) | (b'A' | b'P', None) => None,
                (b'A' | b'P', Some((header, value))) => {
                    let old_data = &value[item::HEADER_BYTES..];
                    let joined = match mode {
                        b'A' => [old_data, data].concat(),
                        _ => [data, old_data].concat(),
                    };
                    Some((Header { cas, ..*header }, joined))
                }
                _ => Some((Header { flags: client_flags, expires, cas }, data.to_vec())),
            };
            match new {
                Some((header, data)) => {
                    self.put(bytes, &header, &data).await?;
                    written = Some(meta_item(&header, data.len(), now));
                    MetaStatus::Hd
                }
                None => MetaStatus::Ns,
            }
        };
        let reply = MetaReply {
            command: MetaCommand::Set,
            status,
            key,
            flags,
            item: written.as_ref(),
            value: None,
        };
        write_meta(out, &reply);
        Ok(())
    }

    async fn meta_delete(
        &self,
        key: &Key<'_>,
        flags: &MetaFlags<'_>,
        now: u32,
        out: &mut Vec<u8>,
    ) -> ferrite::Result<()> {
        let bytes = key.as_bytes();
        let _guard = self.locks.lock(bytes).await;
        let old = self.live(bytes, now).await?;
        let status = match (&old, flags.compare_cas) {
            (None, _) => MetaStatus::Nf,
            (Some((header, _)), Some(want)) if header.cas != want => MetaStatus::Ex,
            (Some(_), _) => {
                self.tree.delete_async(bytes).await?;
                MetaStatus::Hd
            }
        };
        increment(match status {
            MetaStatus::Hd => &self.counters.delete_hits,
            _ => &self.counters.delete_misses,
        });
        let reply =
            MetaReply { command: MetaCommand::Delete, status, key, flags, item: None, value: None };
        write_meta(out, &reply);
        Ok(())
    }

    async fn meta_arithmetic(
        &self,
        key: &Key<'_>,
        flags: &MetaFlags<'_>,
        now: u32,
        out: &mut Vec<u8>,
    ) -> ferrite::Result<()> {
        let bytes = key.as_bytes();
        let incr = !matches!(flags.mode, Some(b'D' | b'd' | b'-'));
        let delta = flags.delta.unwrap_or(1);
        let mut outcome = self.add_delta(bytes, incr, delta, now).await?;
        if let (Ok(None), Some(ttl)) = (&outcome, flags.vivify_ttl) {
            // Auto-vivify: a miss creates the item with the initial value.
            let _guard = self.locks.lock(bytes).await;
            if self.live(bytes, now).await?.is_none() {
                let initial = flags.initial.unwrap_or(0);
                let header = Header {
                    flags: 0,
                    expires: item::expiry(i64::from(ttl), now),
                    cas: self.new_cas(),
                };
                self.put(bytes, &header, initial.to_string().as_bytes()).await?;
                outcome = Ok(Some((initial, header)));
            }
        }
        let (status, number) = match outcome {
            Ok(Some((number, header))) => (MetaStatus::Hd, Some((number, header))),
            Ok(None) => (MetaStatus::Nf, None),
            Err(error) => {
                write_error(out, error);
                return Ok(());
            }
        };
        let text = number.map(|(n, _)| n.to_string());
        let meta = number.map(|(n, header)| meta_item(&header, n.to_string().len(), now));
        let (status, value) = match (status, flags.return_value, &text) {
            (MetaStatus::Hd, true, Some(text)) => (MetaStatus::Va, Some(text.as_bytes())),
            _ => (status, None),
        };
        let reply = MetaReply {
            command: MetaCommand::Arithmetic,
            status,
            key,
            flags,
            item: meta.as_ref(),
            value,
        };
        write_meta(out, &reply);
        Ok(())
    }
}

/// What a meta reply's return flags report of an item.
fn meta_item(header: &Header, size: usize, now: u32) -> MetaItem {
    MetaItem {
        size: size as u64,
        client_flags: header.flags,
        cas: header.cas,
        ttl_remaining: header.ttl_remaining(now),
        ..MetaItem::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    /// Every write of an item waits for its key's lock: a `set` does not slip between the
    /// read and the write of a `cas` (or `append`, `incr`, …) of the same key.
    #[test]
    fn a_set_waits_for_its_keys_lock() {
        let dir = tempfile::tempdir().unwrap();
        let options = ferrite::Options {
            workers: 1,
            create_if_missing: true,
            pool_bytes: 4 << 20,
            ..ferrite::Options::default()
        };
        let db = ferrite::Db::open(dir.path(), options).unwrap();
        let store = Arc::new(
            Store::open(db.tree("memcache").unwrap(), Sweeper::new(false, 1 << 10), Vec::new())
                .unwrap(),
        );
        // Held here as a read-modify-write between its read and its write would hold it.
        let guard = ferrite::sched::block_on(store.locks.lock(b"k"));
        let setter = Arc::clone(&store);
        let set = db
            .spawn(async move {
                let request = Request::Store {
                    command: StoreCommand::Set,
                    key: b"k",
                    flags: 0,
                    exptime: 0,
                    cas: None,
                    data: b"v",
                    noreply: false,
                };
                let mut out = Vec::new();
                setter.execute(&request, &mut out).await;
                out
            })
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert!(!set.is_finished(), "the set went ahead while the key was locked");
        drop(guard);
        assert_eq!(set.wait(), b"STORED\r\n");
        drop(store);
        db.close().unwrap();
    }
}
