//! The sweeper: one task per server that removes dead items (expired, or older than a
//! `flush_all`) and, in cache mode, evicts live ones to keep the data directory within its
//! disk budget (`--disk-budget-mib`, the engine's `max_size_bytes`).
//!
//! Eviction is CLOCK over the items in key order. A *hand* walks the items tree (leaves
//! only: a large item's data is never read to pass it by); the reference bit of an item
//! is a bit of a fixed bitmap picked by a hash of its key, set by every read hit and write.
//! The hand spares an item whose bit is set (and clears it: the second chance) and evicts
//! one whose bit is clear. Keys that share a bit share their chances: the bitmap has about
//! one bit per 1 KiB of the budget (64 Ki to 64 Mi bits, at most 8 MiB), so that is rare.
//! Walking in key order empties whole leaves, which the tree then frees.
//!
//! Pressure is the share of the budget holding data ([`ferrite::SpaceUsage::used_pages`]):
//! above the high mark (95 %, or 64 pages short of the budget on a small one) the sweeper
//! evicts until it is below the low mark (90 %, or 128 pages short), at a pace set by the
//! writes (an eviction per write, 16 keys looked at per write at most). A write that
//! still finds the database full asks for a forced round (at least 1 % of the budget
//! freed, or two laps of the hand; it evicts items not read since the hand last passed
//! even if just written) and retries; a store-mode server never evicts, and such a write
//! answers `SERVER_ERROR out of memory storing object`.
//!
//! The sweeper runs when writes nudge it (every `NUDGE_EVERY` writes, and at once when
//! one finds the database full), so an idle server does no work. Without pressure each
//! nudge sweeps a short stretch of keys for dead items (inline ones: a large item's header
//! sits in its data, which the walk does not read; it is removed when next read or
//! written), while some item written with an expiry was not passed yet, or the soonest
//! expiry the hand passed in its last lap has come. A victim is removed under its key's
//! lock, taken only if free (a write waiting for room may hold it), after its header was
//! read again; its removal is not synced (a crash that brings an evicted item back loses
//! nothing).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use ferrite::sched::yield_now;
use ferrite::{Db, Durability, SpaceUsage, WriteBatch};

use crate::item::{self, Header};
use crate::store::Store;

/// Writes between two nudges of the sweeper.
const NUDGE_EVERY: u64 = 64;
/// Keys a nudge without pressure sweeps for dead items: two per write, so that the hand
/// laps even while every write adds a key.
const SWEEP_KEYS: usize = 128;
/// Keys the hand looks at per step while evicting (the sweeper yields between steps).
const EVICT_KEYS: usize = 64;
/// Most keys the hand looks at per nudge while evicting (16 per write).
const EVICT_LOOK_MAX: usize = 1024;
/// Longest a write waits for a forced round before it answers that the store is full.
const ROOM_WAIT: Duration = Duration::from_secs(5);
/// How often a write waiting for a forced round looks at the clock (the round's end wakes it
/// at once; this only bounds the wait by `ROOM_WAIT`).
const ROOM_TICK: Duration = Duration::from_millis(50);

/// The reference counts: two bits per slot of a key hash, 32 slots a word.
#[derive(Debug)]
struct Clock {
    words: Box<[AtomicU64]>,
    mask: u64,
}

/// A count saturates here: an item read three times outlives three passes of the hand.
const COUNT_MAX: u64 = 3;

impl Clock {
    /// About one slot per KiB of a budget of `max_pages` pages (a power of two, 2^16 to
    /// 2^25 slots: 16 KiB to 8 MiB).
    fn for_budget(max_pages: u64) -> Clock {
        let slots = (max_pages.saturating_mul(4)).next_power_of_two().clamp(1 << 16, 1 << 25);
        Clock { words: (0..slots / 32).map(|_| AtomicU64::new(0)).collect(), mask: slots - 1 }
    }

    /// The word of `key`'s slot and the shift of its count in it.
    fn slot(&self, key: &[u8]) -> (usize, u32) {
        let slot = key_hash(key) & self.mask;
        ((slot / 32) as usize, (slot % 32 * 2) as u32)
    }

    fn count(&self, key: &[u8]) -> u64 {
        let (word, shift) = self.slot(key);
        self.words[word].load(Ordering::Relaxed) >> shift & COUNT_MAX
    }

    /// Changes `key`'s count with `f` (old count to new).
    fn update(&self, key: &[u8], f: impl Fn(u64) -> u64) -> u64 {
        let (word, shift) = self.slot(key);
        let word = &self.words[word];
        let mut now = word.load(Ordering::Relaxed);
        loop {
            let count = now >> shift & COUNT_MAX;
            let new = f(count);
            if new == count {
                return count;
            }
            let next = now & !(COUNT_MAX << shift) | new << shift;
            match word.compare_exchange_weak(now, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return count,
                Err(seen) => now = seen,
            }
        }
    }

    /// A read: one more pass the item survives.
    fn read(&self, key: &[u8]) {
        self.update(key, |count| (count + 1).min(COUNT_MAX));
    }

    /// A write: the new item survives the next pass at least.
    fn wrote(&self, key: &[u8]) {
        self.update(key, |count| count.max(1));
    }

    /// The hand passes `key`: lowers its count; returns the count it had.
    fn pass(&self, key: &[u8]) -> u64 {
        self.update(key, |count| count.saturating_sub(1))
    }

    fn bytes(&self) -> usize {
        self.words.len() * 8
    }
}

/// FNV-1a of the key, mixed (its low bits pick the slot).
fn key_hash(key: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
    hash ^ (hash >> 33)
}

/// A wake-up for one waiting task that is not lost when it comes before the wait.
#[derive(Debug, Default)]
struct Signal {
    state: Mutex<(bool, Option<Waker>)>,
}

impl Signal {
    fn raise(&self) {
        let waker = {
            let mut state = self.state.lock().unwrap();
            state.0 = true;
            state.1.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    fn wait(&self) -> SignalWait<'_> {
        SignalWait(self)
    }
}

struct SignalWait<'a>(&'a Signal);

impl Future for SignalWait<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.0.state.lock().unwrap();
        if std::mem::take(&mut state.0) {
            return Poll::Ready(());
        }
        state.1 = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// The sweeper's state shared with the writers.
#[derive(Debug)]
pub struct Sweeper {
    /// The reference bits; `None` in store mode (nothing is evicted).
    clock: Option<Clock>,
    signal: Signal,
    writes: AtomicU64,
    /// A write found the database full: evict now.
    forced: AtomicBool,
    /// Forced rounds done (a full write waits for the next one).
    rounds: AtomicU64,
    /// Writes waiting for the next forced round: woken when it ends, or at `stop`.
    round_waiters: Mutex<Vec<Waker>>,
    stopping: AtomicBool,
    /// Live items evicted.
    pub evictions: AtomicU64,
    /// Dead items removed by the sweep.
    pub reclaimed: AtomicU64,
    /// Items written with an expiry, and `flush_all`s: while the hand has not passed all
    /// of them, the sweep walks (`Hand::checked`).
    expiring: AtomicU64,
}

impl Sweeper {
    /// A sweeper that evicts (`evict`: cache mode) for a budget of `max_pages` pages.
    pub fn new(evict: bool, max_pages: u64) -> Sweeper {
        Sweeper {
            clock: evict.then(|| Clock::for_budget(max_pages)),
            signal: Signal::default(),
            writes: AtomicU64::new(0),
            forced: AtomicBool::new(false),
            rounds: AtomicU64::new(0),
            round_waiters: Mutex::new(Vec::new()),
            stopping: AtomicBool::new(false),
            evictions: AtomicU64::new(0),
            reclaimed: AtomicU64::new(0),
            expiring: AtomicU64::new(0),
        }
    }

    /// Whether live items are evicted (cache mode).
    pub fn evicts(&self) -> bool {
        self.clock.is_some()
    }

    /// Memory the reference bits take.
    pub fn clock_bytes(&self) -> usize {
        self.clock.as_ref().map_or(0, Clock::bytes)
    }

    /// `key` was read: it survives one more pass of the hand.
    pub fn referenced(&self, key: &[u8]) {
        if let Some(clock) = &self.clock {
            clock.read(key);
        }
    }

    /// `key` was written (`expires`: with an expiry).
    pub fn wrote(&self, key: &[u8], expires: bool) {
        if let Some(clock) = &self.clock {
            clock.wrote(key);
        }
        if expires {
            self.expiring.fetch_add(1, Ordering::Relaxed);
        }
        if self.writes.fetch_add(1, Ordering::Relaxed) % NUDGE_EVERY == NUDGE_EVERY - 1 {
            self.signal.raise();
        }
    }

    /// A write found the database full: asks for a forced round and waits until one is
    /// done (woken by its end, not polling). Returns whether it is worth writing again
    /// (false in store mode, when stopping, or after `ROOM_WAIT`).
    pub async fn make_room(&self) -> bool {
        if !self.evicts() {
            return false;
        }
        let round = self.rounds.load(Ordering::Acquire);
        self.forced.store(true, Ordering::Release);
        self.signal.raise();
        let started = Instant::now();
        loop {
            let mut done = std::pin::pin!(RoundDone { sweeper: self, round });
            let mut tick = std::pin::pin!(ferrite::sched::net::sleep(ROOM_TICK));
            std::future::poll_fn(|cx| {
                if done.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(());
                }
                tick.as_mut().poll(cx)
            })
            .await;
            if self.stopping.load(Ordering::Acquire) {
                return false;
            }
            if self.rounds.load(Ordering::Acquire) != round {
                return true;
            }
            if started.elapsed() > ROOM_WAIT {
                return false;
            }
        }
    }

    /// A forced round ended, or the sweeper stops: every write waiting for one goes on.
    fn wake_round_waiters(&self) {
        let waiters = std::mem::take(&mut *self.round_waiters.lock().unwrap());
        waiters.into_iter().for_each(Waker::wake);
    }

    /// A `flush_all`: every item is dead, the sweep has a lap to walk.
    pub fn flushed(&self) {
        self.expiring.fetch_add(1, Ordering::Relaxed);
        self.signal.raise();
    }

    /// Ends the sweeper's task (it returns at its next wake-up, which this causes).
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        self.signal.raise();
        self.wake_round_waiters();
    }
}

/// Ready once a forced round after `round` ended, or the sweeper stops.
struct RoundDone<'a> {
    sweeper: &'a Sweeper,
    round: u64,
}

impl Future for RoundDone<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let over = |s: &Sweeper| {
            s.rounds.load(Ordering::Acquire) != self.round || s.stopping.load(Ordering::Acquire)
        };
        if over(self.sweeper) {
            return Poll::Ready(());
        }
        let mut waiters = self.sweeper.round_waiters.lock().unwrap();
        // Looked at again under the lock: a round that ended before this took the list
        // (after its count went up) and this sees the count; else it finds this waker.
        if over(self.sweeper) {
            return Poll::Ready(());
        }
        waiters.push(cx.waker().clone());
        Poll::Pending
    }
}

/// Above this many used pages the sweeper evicts...
fn high_mark(usage: &SpaceUsage) -> u64 {
    usage.max_pages.saturating_sub((usage.max_pages / 20).max(64))
}

/// ...until they are at most this many.
fn low_mark(usage: &SpaceUsage) -> u64 {
    usage.max_pages.saturating_sub((usage.max_pages / 10).max(128))
}

/// The sweeper's task: runs until [`Sweeper::stop`]. Errors of a step (an I/O error, say)
/// end the round; the next nudge tries again.
pub async fn run(store: &Store, db: &Db) {
    let sweeper = &store.sweeper;
    let mut hand = Hand::default();
    loop {
        sweeper.signal.wait().await;
        if sweeper.stopping.load(Ordering::Acquire) {
            return;
        }
        let forced = sweeper.evicts() && sweeper.forced.swap(false, Ordering::AcqRel);
        let _ = round(store, db, &mut hand, forced).await;
        if forced {
            sweeper.rounds.fetch_add(1, Ordering::AcqRel);
            sweeper.wake_round_waiters();
        }
    }
}

/// One wake-up's work. Under pressure the hand goes on until it evicted as many items as
/// writes came since the last nudge (`NUDGE_EVERY`), looking at `EVICT_LOOK_MAX` keys at
/// most: eviction keeps pace with the writes. A forced round goes on until it freed its
/// share (two laps at most), and evicts items never read since the hand last passed too
/// (a write's count): every item may just have been written, and the writer waits.
async fn round(store: &Store, db: &Db, hand: &mut Hand, forced: bool) -> ferrite::Result<()> {
    let sweeper = &store.sweeper;
    let start = db.space_usage();
    let goal = start.used_pages().saturating_sub((start.max_pages / 100).max(64));
    let laps = hand.laps;
    let (mut looked, mut evicted) = (0, 0);
    loop {
        let usage = db.space_usage();
        let used = usage.used_pages();
        hand.evicting = sweeper.evicts()
            && (used > high_mark(&usage) || (hand.evicting && used > low_mark(&usage)));
        let evicting = if forced {
            used > goal && hand.laps < laps + 2
        } else {
            hand.evicting && evicted < NUDGE_EVERY as usize && looked < EVICT_LOOK_MAX
        };
        if !evicting {
            // Without pressure, a stretch of the expiry sweep while some item written with
            // an expiry (or before a flush) was not passed yet, or one the hand passed alive
            // has expired since.
            let unchecked = sweeper.expiring.load(Ordering::Relaxed) > hand.checked
                || hand.due.is_some_and(|due| due <= item::now());
            if looked == 0 && unchecked {
                step(store, db, hand, SWEEP_KEYS, None).await?;
            }
            return Ok(());
        }
        let spare_above = if forced { 1 } else { 0 };
        let (n, victims) = step(store, db, hand, EVICT_KEYS, Some(spare_above)).await?;
        looked += n;
        evicted += victims;
        yield_now().await;
        if sweeper.stopping.load(Ordering::Acquire) {
            return Ok(());
        }
    }
}

/// Where the walk is.
#[derive(Debug, Default)]
struct Hand {
    /// The next key to look at (empty: the first).
    next: Vec<u8>,
    /// Times the walk went past the last key.
    laps: u64,
    /// `Sweeper::expiring` when the lap under way began, and as of the last lap done:
    /// every item written with an expiry before the latter was passed since.
    lap_began: u64,
    checked: u64,
    /// The soonest expiry of the items the lap under way passed and left (alive, or dead
    /// but busy), and that of the last lap done: once it comes, the sweep walks again.
    lap_soonest: Option<u32>,
    due: Option<u32>,
    /// Evicting until below the low mark.
    evicting: bool,
}

/// Looks at the next `keys` items from the hand: removes dead ones and, when evicting
/// (`evict`: `Some(spare_above)`), live ones whose count was not above `spare_above` (0:
/// not read or written since the hand last passed). Returns the keys looked at and the
/// items evicted.
async fn step(
    store: &Store,
    db: &Db,
    hand: &mut Hand,
    keys: usize,
    evict: Option<u64>,
) -> ferrite::Result<(usize, usize)> {
    let mut seen: Vec<(Vec<u8>, Option<Header>)> = Vec::with_capacity(keys);
    let visited = store
        .tree
        .scan_leaves_async(&hand.next, keys, |key, value| {
            let header = value.and_then(|v| item::decode(v).map(|(header, _)| header));
            seen.push((key.to_vec(), header));
        })
        .await?;
    let lap_done = visited != keys || seen.is_empty();
    if !lap_done {
        let (last, _) = &seen[seen.len() - 1];
        hand.next.clear();
        hand.next.extend_from_slice(last);
        // The least key after `last`.
        hand.next.push(0);
    }
    let now = item::now();
    let mut evicted = 0;
    let swept = sweep_items(store, db, seen, evict, now, &mut hand.lap_soonest, &mut evicted).await;
    if swept.is_err() {
        // Items after the failed one were not looked at: the next lap walks at once.
        hand.lap_soonest = Some(now);
    }
    if lap_done {
        hand.next.clear();
        hand.laps += 1;
        hand.checked = hand.lap_began;
        hand.lap_began = store.sweeper.expiring.load(Ordering::Relaxed);
        hand.due = hand.lap_soonest.take();
    }
    swept?;
    Ok((visited, evicted))
}

/// Removes the dead items of `seen` and, when evicting, the unreferenced live ones (see
/// [`step`]); counts evictions in `evicted`; lowers `soonest` to the expiry of every item
/// it leaves that has one.
async fn sweep_items(
    store: &Store,
    db: &Db,
    seen: Vec<(Vec<u8>, Option<Header>)>,
    evict: Option<u64>,
    now: u32,
    soonest: &mut Option<u32>,
    evicted: &mut usize,
) -> ferrite::Result<()> {
    let evicting = evict.is_some();
    let spare_above = evict.unwrap_or(0);
    let sweeper = &store.sweeper;
    let dead = |header: &Header| header.expired(now) || store.flushed(header.cas);
    // An item left in the tree that expires (0: never) then: the sweep comes back for it.
    let mut left = |expires: u32| {
        if expires != 0 {
            *soonest = Some(soonest.map_or(expires, |s| s.min(expires)));
        }
    };
    let expiry = |header: &Option<Header>| header.as_ref().map_or(0, |h| h.expires);
    for (key, header) in seen {
        // Keys no client can send (the flush mark) are the server's own.
        if key.first() == Some(&0) {
            continue;
        }
        let known_dead = header.as_ref().is_some_and(dead);
        if !known_dead {
            let spared = match &sweeper.clock {
                Some(clock) if evicting => clock.pass(&key) > spare_above,
                _ => true,
            };
            if spared {
                left(expiry(&header));
                continue;
            }
        }
        let Some(_guard) = store.locks.try_lock(&key) else {
            // Busy: a dead item is looked at again in the next lap.
            left(if known_dead { now } else { expiry(&header) });
            continue;
        };
        // The item as it is now, under its lock: a write since the walk read it set its
        // bit (or made it live again).
        let mut head = [0u8; item::HEADER_BYTES];
        if store.tree.read_at_async(&key, 0, &mut head).await? != Some(item::HEADER_BYTES) {
            continue;
        }
        let Some((header, _)) = item::decode(&head) else { continue };
        let is_dead = dead(&header);
        // (The pass lowered the count: above 0 now, the item was read or written since.)
        let unreferenced = sweeper.clock.as_ref().is_some_and(|clock| clock.count(&key) == 0);
        if !(is_dead || evicting && unreferenced) {
            left(header.expires);
            continue;
        }
        let mut batch = WriteBatch::new();
        batch.delete(&store.tree, &key).durability(Durability::None);
        db.write_async(&batch).await?;
        if is_dead {
            sweeper.reclaimed.fetch_add(1, Ordering::Relaxed);
        } else {
            sweeper.evictions.fetch_add(1, Ordering::Relaxed);
            *evicted += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_buy_passes_of_the_hand() {
        let clock = Clock::for_budget(1 << 10);
        assert_eq!(clock.bytes(), (1 << 16) / 4, "the smallest table");
        assert_eq!(clock.pass(b"a"), 0, "never referenced");
        clock.wrote(b"a");
        assert_eq!(clock.pass(b"a"), 1, "a new item survives one pass");
        assert_eq!(clock.pass(b"a"), 0, "then not");
        for _ in 0..10 {
            clock.read(b"b");
        }
        assert_eq!(clock.count(b"b"), COUNT_MAX);
        clock.wrote(b"b");
        assert_eq!(clock.count(b"b"), COUNT_MAX, "a write lowers no count");
        assert_eq!([clock.pass(b"b"), clock.pass(b"b"), clock.pass(b"b")], [3, 2, 1]);
        assert_eq!(clock.pass(b"b"), 0, "three passes for a hot item");
        assert_eq!(clock.count(b"b"), 0);
        assert_eq!(Clock::for_budget(1 << 40).bytes(), 8 << 20, "at most 8 MiB");
        // Keys spread over the slots, and neighbours in a word do not disturb each other.
        let slots: std::collections::HashSet<_> =
            (0..1000).map(|i| clock.slot(format!("key:{i}").as_bytes())).collect();
        assert!(slots.len() > 990, "{} distinct slots of 1000 keys", slots.len());
        let keys: Vec<String> = (0..2000).map(|i| format!("k{i}")).collect();
        for key in &keys {
            clock.read(key.as_bytes());
        }
        assert!(keys.iter().all(|k| clock.count(k.as_bytes()) >= 1));
    }

    #[test]
    fn marks_leave_room_on_budgets_large_and_small() {
        // (`SpaceUsage` is `#[non_exhaustive]`: built from its default.)
        let usage = |max_pages| {
            let mut usage = SpaceUsage::default();
            usage.max_pages = max_pages;
            usage
        };
        assert_eq!(high_mark(&usage(100_000)), 95_000);
        assert_eq!(low_mark(&usage(100_000)), 90_000);
        assert_eq!(high_mark(&usage(1000)), 936);
        assert_eq!(low_mark(&usage(1000)), 872);
    }

    #[test]
    fn a_raised_signal_is_not_lost() {
        let signal = Signal::default();
        signal.raise();
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut wait = std::pin::pin!(signal.wait());
        assert_eq!(wait.as_mut().poll(&mut cx), Poll::Ready(()));
        let mut again = std::pin::pin!(signal.wait());
        assert_eq!(again.as_mut().poll(&mut cx), Poll::Pending);
        signal.raise();
        assert_eq!(again.as_mut().poll(&mut cx), Poll::Ready(()));
    }
}
