//! Intents: keys that running transactions read in order to change them
//! ([`Transaction::get_for_update`](super::Transaction::get_for_update)). A second
//! transaction that reads such a key for update waits until the first one ends (commits,
//! fails or is dropped) and then reads what it left, instead of reading the value the first
//! is about to replace, running on, and failing at its commit with a conflict. Two
//! New-Orders of one TPC-C district are the case: both read the district's next order id
//! and write it back, and without a wait the second one's whole work is thrown away.
//!
//! An intent is a hint, never a lock that isolation depends on: the commit validates every
//! read as before, so a wait may be skipped or cut short without harm to correctness, and
//! the rules keep every wait short and free of deadlocks:
//!
//! - A transaction about to wait follows what the owner waits for, and what that one's
//!   owner waits for, and so on (under one lock, `Intents::waiting`, so no two waits are
//!   added at once): if the chain comes back to itself, the wait would close a cycle, and
//!   it reads on instead.
//! - No wait lasts longer than [`Options::update_wait`](crate::Options::update_wait) (a
//!   transaction a caller keeps open holds its intents until it ends).
//! - A blocking read for update made inside a task does not wait at all: the owner may be a
//!   task of the same worker, which cannot run meanwhile.
//!
//! Intents are kept by a 64-bit hash of (tree id, key) in shards of short lists; two keys
//! with one hash would only make a transaction wait for one it has no conflict with. Each
//! transaction has a stamp, given at its first intent, that names it here.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::task::Waker;
use std::time::Duration;

use crate::id_hash::IdHasher;

/// Owners followed from a wait before it is taken as a cycle anyway (chains are short:
/// each link is a transaction waiting).
const MAX_CHAIN: usize = 64;

/// Shards of the intent table (a power of two).
const SHARDS: usize = 64;

/// The intents of a database's running transactions.
#[derive(Debug)]
pub(super) struct Intents {
    shards: Box<[Mutex<Vec<Intent>>]>,
    /// The next stamp (stamps start at 1; 0 is "none yet").
    stamps: AtomicU64,
    /// What each waiting transaction waits for: its stamp, the intent's hash. Taken before
    /// any shard's lock, and only by a transaction about to wait or done waiting.
    waiting: Mutex<HashMap<u64, u64, BuildHasherDefault<IdHasher>>>,
    /// The longest a read for update waits.
    pub(super) wait: Duration,
}

/// A key intended by a transaction, and the wakers of those waiting for it to end.
#[derive(Debug)]
struct Intent {
    hash: u64,
    owner: u64,
    waiters: Vec<Waker>,
}

/// What [`Intents::claim`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Claim {
    /// The intent is the caller's (now, or already).
    Taken,
    /// Another transaction holds it: the caller's waker was registered, to be woken when
    /// that one ends, and the caller counts as waiting until it calls
    /// [`Intents::done_waiting`].
    Wait,
    /// Another transaction holds it, and waits (perhaps through others) for the caller:
    /// read on without waiting.
    Pass,
}

impl Intents {
    pub(super) fn new(wait: Duration) -> Intents {
        let shards = (0..SHARDS).map(|_| Mutex::new(Vec::new())).collect();
        Intents { shards, stamps: AtomicU64::new(1), waiting: Mutex::default(), wait }
    }

    /// A new transaction's stamp: later than every stamp handed out before.
    pub(super) fn stamp(&self) -> u64 {
        self.stamps.fetch_add(1, Ordering::Relaxed)
    }

    /// The hash intents of `key` in tree `tree_id` are kept by.
    pub(super) fn hash(tree_id: u64, key: &[u8]) -> u64 {
        let mut hasher = IdHasher::default();
        hasher.write_u64(tree_id);
        hasher.write(key);
        hasher.write_u64(key.len() as u64);
        hasher.finish()
    }

    fn shard(&self, hash: u64) -> &Mutex<Vec<Intent>> {
        // (The multiply leaves its best-mixed bits at the top.)
        &self.shards[(hash >> 58) as usize % SHARDS]
    }

    /// The transaction holding the intent on `hash`, if one does.
    fn owner(&self, hash: u64) -> Option<u64> {
        let intents = self.shard(hash).lock().unwrap();
        intents.iter().find(|intent| intent.hash == hash).map(|intent| intent.owner)
    }

    /// Takes the intent on `hash` for transaction `owner` if no transaction holds it, or
    /// tells what to do if one does (registering `waker` to wait for it).
    pub(super) fn claim(&self, hash: u64, owner: u64, waker: &Waker) -> Claim {
        {
            let mut intents = self.shard(hash).lock().unwrap();
            match intents.iter().find(|intent| intent.hash == hash) {
                None => {
                    intents.push(Intent { hash, owner, waiters: Vec::new() });
                    return Claim::Taken;
                }
                Some(intent) if intent.owner == owner => return Claim::Taken,
                Some(_) => {}
            }
        }
        // Held by another: wait unless that closes a cycle. Checked and registered under
        // `waiting` (then a shard's lock at a time), so no other wait joins meanwhile.
        let mut waiting = self.waiting.lock().unwrap();
        let mut next = self.owner(hash);
        for _ in 0..MAX_CHAIN {
            match next {
                None => break,
                Some(holder) if holder == owner => return Claim::Pass,
                // (A holder that owns what it waited for took it and is about to say so.)
                Some(holder) => {
                    next = waiting
                        .get(&holder)
                        .and_then(|&h| self.owner(h))
                        .filter(|&next| next != holder)
                }
            }
        }
        if next.is_some() {
            return Claim::Pass;
        }
        let mut intents = self.shard(hash).lock().unwrap();
        match intents.iter_mut().find(|intent| intent.hash == hash) {
            // Released meanwhile.
            None => {
                intents.push(Intent { hash, owner, waiters: Vec::new() });
                Claim::Taken
            }
            Some(intent) => {
                if !intent.waiters.iter().any(|w| w.will_wake(waker)) {
                    intent.waiters.push(waker.clone());
                }
                waiting.insert(owner, hash);
                Claim::Wait
            }
        }
    }

    /// Transaction `owner` no longer waits (it took the intent, read on, or gave up).
    pub(super) fn done_waiting(&self, owner: u64) {
        self.waiting.lock().unwrap().remove(&owner);
    }

    /// Ends `owner`'s intent on each of `hashes`, waking whoever waits for them.
    pub(super) fn release(&self, hashes: &[u64], owner: u64) {
        let mut woken = Vec::new();
        for &hash in hashes {
            let mut intents = self.shard(hash).lock().unwrap();
            let mine = intents.iter().position(|i| i.hash == hash && i.owner == owner);
            if let Some(at) = mine {
                woken.append(&mut intents.swap_remove(at).waiters);
            }
        }
        // Woken outside the shards' locks.
        for waker in woken {
            waker.wake();
        }
    }

    /// Intents held now (tests).
    #[cfg(test)]
    pub(super) fn held(&self) -> usize {
        self.shards.iter().map(|shard| shard.lock().unwrap().len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::WakeCount as Count;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    #[test]
    fn a_wait_that_would_close_a_cycle_reads_on_and_releases_wake_the_waiters() {
        let intents = Intents::new(Duration::from_millis(1));
        let (one, two, three) = (intents.stamp(), intents.stamp(), intents.stamp());
        assert!(one < two && two < three);
        let woken = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&woken));
        let (a, b, c) = (Intents::hash(1, b"a"), Intents::hash(1, b"b"), Intents::hash(1, b"c"));
        assert_ne!(a, Intents::hash(2, b"a"), "the tree is part of the hash");
        assert_eq!(intents.claim(a, one, &waker), Claim::Taken);
        assert_eq!(intents.claim(a, one, &waker), Claim::Taken, "taken again by its owner");
        assert_eq!(intents.claim(b, two, &waker), Claim::Taken);
        assert_eq!(intents.claim(c, three, &waker), Claim::Taken);
        // Two waits for one, three for two (registered once however often it asks).
        assert_eq!(intents.claim(a, two, &waker), Claim::Wait);
        assert_eq!(intents.claim(b, three, &waker), Claim::Wait);
        assert_eq!(intents.claim(b, three, &waker), Claim::Wait);
        // One waiting for three would close one -> three -> two -> one: it reads on.
        assert_eq!(intents.claim(c, one, &waker), Claim::Pass);
        // Once two no longer waits, there is no cycle: one may wait for three.
        intents.done_waiting(two);
        assert_eq!(intents.claim(c, one, &waker), Claim::Wait);
        assert_eq!(intents.held(), 3);
        // Another owner's release changes nothing; the owner's wakes its waiters once.
        intents.release(&[b], one);
        assert_eq!((intents.held(), woken.0.load(Ordering::Relaxed)), (3, 0));
        intents.release(&[b], two);
        assert_eq!((intents.held(), woken.0.load(Ordering::Relaxed)), (2, 1));
        assert_eq!(intents.claim(b, three, &waker), Claim::Taken);
        intents.done_waiting(three);
        intents.release(&[c], three);
        assert_eq!(woken.0.load(Ordering::Relaxed), 2, "one, waiting for c, is woken");
        intents.done_waiting(one);
        intents.release(&[a], one);
        intents.release(&[b], three);
        assert_eq!(intents.held(), 0);
        assert!(intents.waiting.lock().unwrap().is_empty());
    }
}
