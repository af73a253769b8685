//! Slices of large items (objects) shared between connections. A slice being read is waited
//! for by every other GET of it, so a herd of GETs on one cold large item reads each slice
//! once; and slices read lately are kept, up to a byte budget (oldest out first), so the
//! herd's stragglers and the hot large items of a skewed load are answered from memory.
//!
//! A slice is named by its object's id and its offset: a put of a key makes a new object
//! (ids are never reused), and the server never writes an object in place, so the bytes of
//! a name never change. Each reader first finds the object its key holds
//! (`Tree::value_slices_async`), so it never gets another version's bytes.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};

use ferrite::ValueSlices;

/// A slice's name: its object's id and its offset in the value.
type SliceName = (u64, u64);

#[derive(Debug)]
enum Slot {
    /// Being read; these GETs wait for it.
    Reading(Vec<Waker>),
    Ready(Arc<[u8]>),
}

#[derive(Debug, Default)]
struct Slots {
    slots: HashMap<SliceName, Slot>,
    /// Ready slices, oldest first (a name may be here again after it was dropped).
    order: VecDeque<SliceName>,
    /// Bytes of the ready slices.
    bytes: usize,
}

/// The slices shared between connections (see the module's notes).
#[derive(Debug, Default)]
pub struct SliceCache {
    slots: Mutex<Slots>,
    /// Most bytes of ready slices kept (the newest is kept whatever its size, for the GETs
    /// waiting on it).
    budget: AtomicUsize,
    /// Slices read from the disk.
    pub reads: AtomicU64,
    /// Slices a GET took from another's read, or from those kept.
    pub shared: AtomicU64,
}

enum Step {
    Copy(Arc<[u8]>),
    Wait,
    Lead,
    Alone,
}

impl SliceCache {
    /// Keeps at most `bytes` of slices read lately.
    pub fn set_budget(&self, bytes: usize) {
        self.budget.store(bytes, Ordering::Relaxed);
    }

    /// Reads the next `buf.len()` bytes of `slices` into `buf`, as
    /// [`ValueSlices::read_async`] does, sharing the read with other GETs of the same
    /// slice. `None`: the key no longer holds the value `slices` began on.
    pub async fn read(
        &self,
        slices: &mut ValueSlices,
        buf: &mut [u8],
    ) -> ferrite::Result<Option<usize>> {
        let Some(id) = slices.object_id() else { return slices.read_async(buf).await };
        let name = (id, slices.position());
        loop {
            let step = {
                let mut slots = self.slots.lock().unwrap();
                match slots.slots.get(&name) {
                    Some(Slot::Ready(bytes)) if bytes.len() == buf.len() => {
                        Step::Copy(Arc::clone(bytes))
                    }
                    // Cut otherwise (a GET of a multi-get past `REPLY_WHOLE_MAX` reads one
                    // page where another read the value whole): read alone, kept by none.
                    Some(Slot::Ready(_)) => Step::Alone,
                    Some(Slot::Reading(_)) => Step::Wait,
                    None => {
                        slots.slots.insert(name, Slot::Reading(Vec::new()));
                        Step::Lead
                    }
                }
            };
            match step {
                Step::Copy(bytes) => {
                    buf.copy_from_slice(&bytes);
                    slices.skip(bytes.len() as u64);
                    self.shared.fetch_add(1, Ordering::Relaxed);
                    return Ok(Some(bytes.len()));
                }
                Step::Alone => {
                    self.reads.fetch_add(1, Ordering::Relaxed);
                    return slices.read_async(buf).await;
                }
                // Then looks again: ready, or gone (the read failed or was dropped: this
                // GET reads it).
                Step::Wait => self.wait(name).await,
                Step::Lead => {
                    let mut leading = Leading { cache: self, name, done: false };
                    self.reads.fetch_add(1, Ordering::Relaxed);
                    let read = slices.read_async(buf).await;
                    let whole = matches!(read, Ok(Some(n)) if n == buf.len());
                    leading.finish(whole.then(|| Arc::from(&buf[..])));
                    return read;
                }
            }
        }
    }

    /// Waits while slice `name` is being read.
    async fn wait(&self, name: SliceName) {
        std::future::poll_fn(|cx| {
            let mut slots = self.slots.lock().unwrap();
            match slots.slots.get_mut(&name) {
                Some(Slot::Reading(wakers)) => {
                    if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
                        wakers.push(cx.waker().clone());
                    }
                    Poll::Pending
                }
                _ => Poll::Ready(()),
            }
        })
        .await
    }
}

/// The GET reading a slice for the others: when it is done (or dropped midway), the slot
/// holds the bytes (or is gone) and every waiter is woken.
struct Leading<'c> {
    cache: &'c SliceCache,
    name: SliceName,
    done: bool,
}

impl Leading<'_> {
    fn finish(&mut self, bytes: Option<Arc<[u8]>>) {
        self.done = true;
        let mut slots = self.cache.slots.lock().unwrap();
        let waiters = match slots.slots.remove(&self.name) {
            Some(Slot::Reading(wakers)) => wakers,
            _ => Vec::new(),
        };
        if let Some(bytes) = bytes {
            slots.bytes += bytes.len();
            slots.slots.insert(self.name, Slot::Ready(bytes));
            slots.order.push_back(self.name);
            let budget = self.cache.budget.load(Ordering::Relaxed);
            while slots.bytes > budget && slots.order.len() > 1 {
                let oldest = slots.order.pop_front().expect("more than one");
                if let Some(Slot::Ready(gone)) = slots.slots.get(&oldest) {
                    slots.bytes -= gone.len();
                    slots.slots.remove(&oldest);
                }
            }
        }
        drop(slots);
        for waker in waiters {
            waker.wake();
        }
    }
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.finish(None);
        }
    }
}
