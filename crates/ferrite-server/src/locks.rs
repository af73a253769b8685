//! Striped key locks for tasks: the read-modify-write commands (`add`, `cas`, `incr`,
//! `append`, ...) of one key run one at a time, so that two connections cannot both see the
//! old item and both write. A task waiting for a stripe yields (it never blocks its worker);
//! a release wakes the first waiter.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

/// Stripes: keys hash onto them; two keys may share one (they then take turns).
const STRIPES: usize = 1024;

#[derive(Debug)]
pub struct KeyLocks {
    stripes: Vec<Mutex<Stripe>>,
}

#[derive(Debug, Default)]
struct Stripe {
    held: bool,
    waiters: VecDeque<(u64, Waker)>,
    next_ticket: u64,
}

impl Default for KeyLocks {
    fn default() -> Self {
        KeyLocks { stripes: (0..STRIPES).map(|_| Mutex::new(Stripe::default())).collect() }
    }
}

impl KeyLocks {
    /// Takes the stripe of `key`, yielding while another task holds it.
    pub fn lock(&self, key: &[u8]) -> LockFuture<'_> {
        LockFuture { locks: self, stripe: stripe_of(key), ticket: None }
    }

    /// Takes the stripes of all of `keys` (each once, in ascending order: two tasks that
    /// take several never wait for each other in a cycle, and one that takes a single
    /// stripe waits for nothing else).
    pub async fn lock_all<'k>(&self, keys: impl Iterator<Item = &'k [u8]>) -> Vec<KeyGuard<'_>> {
        let mut stripes: Vec<usize> = keys.map(stripe_of).collect();
        stripes.sort_unstable();
        stripes.dedup();
        let mut guards = Vec::with_capacity(stripes.len());
        for stripe in stripes {
            guards.push(LockFuture { locks: self, stripe, ticket: None }.await);
        }
        guards
    }

    /// Takes the stripe of `key` if it is free and nobody waits for it; `None` otherwise.
    /// (The sweeper's way: it never waits for a client's write, which may be waiting for
    /// it to make room.)
    pub fn try_lock(&self, key: &[u8]) -> Option<KeyGuard<'_>> {
        let stripe = stripe_of(key);
        let mut state = self.stripes[stripe].lock().unwrap();
        if state.held || !state.waiters.is_empty() {
            return None;
        }
        state.held = true;
        Some(KeyGuard { locks: self, stripe })
    }

    fn unlock(&self, stripe: usize) {
        let mut state = self.stripes[stripe].lock().unwrap();
        state.held = false;
        if let Some((_, waker)) = state.waiters.front() {
            waker.wake_by_ref();
        }
    }
}

/// FNV-1a of the key, onto a stripe.
fn stripe_of(key: &[u8]) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    (hash % STRIPES as u64) as usize
}

/// Held until dropped.
#[derive(Debug)]
pub struct KeyGuard<'a> {
    locks: &'a KeyLocks,
    stripe: usize,
}

impl Drop for KeyGuard<'_> {
    fn drop(&mut self) {
        self.locks.unlock(self.stripe);
    }
}

/// See [`KeyLocks::lock`].
#[derive(Debug)]
pub struct LockFuture<'a> {
    locks: &'a KeyLocks,
    stripe: usize,
    /// This waiter's place in line, once it waited.
    ticket: Option<u64>,
}

impl<'a> Future for LockFuture<'a> {
    type Output = KeyGuard<'a>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<KeyGuard<'a>> {
        let (locks, stripe) = (self.locks, self.stripe);
        let mut state = locks.stripes[stripe].lock().unwrap();
        // First come first served: a newcomer does not pass the waiters in line.
        let first = match self.ticket {
            Some(ticket) => state.waiters.front().is_some_and(|(t, _)| *t == ticket),
            None => state.waiters.is_empty(),
        };
        if !state.held && first {
            state.held = true;
            if self.ticket.take().is_some() {
                state.waiters.pop_front();
            }
            return Poll::Ready(KeyGuard { locks, stripe });
        }
        match self.ticket {
            Some(ticket) => {
                if let Some(entry) = state.waiters.iter_mut().find(|(t, _)| *t == ticket) {
                    entry.1.clone_from(cx.waker());
                }
            }
            None => {
                let ticket = state.next_ticket;
                state.next_ticket += 1;
                state.waiters.push_back((ticket, cx.waker().clone()));
                self.ticket = Some(ticket);
            }
        }
        Poll::Pending
    }
}

impl Drop for LockFuture<'_> {
    fn drop(&mut self) {
        // A waiter given up leaves the line; if it was first, the next one may go.
        let Some(ticket) = self.ticket else { return };
        let mut state = self.locks.stripes[self.stripe].lock().unwrap();
        let was_first = state.waiters.front().is_some_and(|(t, _)| *t == ticket);
        state.waiters.retain(|(t, _)| *t != ticket);
        if was_first && !state.held {
            if let Some((_, waker)) = state.waiters.front() {
                waker.wake_by_ref();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Threads polling lock futures by hand (parking between polls): one holder at a time,
    /// every one served.
    #[test]
    fn one_holder_per_stripe_and_everyone_served() {
        struct Unpark(std::thread::Thread);
        impl std::task::Wake for Unpark {
            fn wake(self: Arc<Self>) {
                self.0.unpark();
            }
        }
        let locks = Arc::new(KeyLocks::default());
        let inside = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..6)
            .map(|_| {
                let (locks, inside) = (Arc::clone(&locks), Arc::clone(&inside));
                std::thread::spawn(move || {
                    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
                    let mut cx = Context::from_waker(&waker);
                    for _ in 0..300 {
                        let mut future = std::pin::pin!(locks.lock(b"the key"));
                        let guard = loop {
                            match future.as_mut().poll(&mut cx) {
                                Poll::Ready(guard) => break guard,
                                Poll::Pending => std::thread::park(),
                            }
                        };
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                        std::hint::spin_loop();
                        inside.fetch_sub(1, Ordering::SeqCst);
                        drop(guard);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_ne!(stripe_of(b"a"), stripe_of(b"b"), "keys spread over stripes");
    }

    #[test]
    fn lock_all_takes_each_stripe_once() {
        let locks = KeyLocks::default();
        let keys: [&[u8]; 4] = [b"a", b"b", b"a", b"c"];
        let guards = ferrite::sched::block_on(locks.lock_all(keys.into_iter()));
        assert_eq!(guards.len(), 3, "a key twice is one stripe, taken once");
        assert!(locks.try_lock(b"b").is_none());
        drop(guards);
        assert!(locks.try_lock(b"a").is_some() && locks.try_lock(b"c").is_some());
    }

    #[test]
    fn try_lock_takes_only_a_free_stripe() {
        let locks = KeyLocks::default();
        let held = locks.try_lock(b"k").expect("a free stripe");
        assert!(locks.try_lock(b"k").is_none(), "held");
        drop(held);
        assert!(locks.try_lock(b"k").is_some(), "free again");
    }
}
