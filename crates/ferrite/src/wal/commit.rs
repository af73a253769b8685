//! The commit lock: one commit at a time applies its changes and appends its record, so
//! that records are in the log in the order their changes were made. Taken by blocking
//! threads (`lock`) and by tasks (`lock_async`, which yields instead of blocking the worker).
//! Held only while a commit applies and appends, never while it waits for the log's sync:
//! commits waiting for the same sync share it (group commit).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Condvar, Mutex};
use std::task::{Context, Poll, Waker};

#[derive(Debug, Default)]
pub struct CommitLock {
    locked: Mutex<bool>,
    released: Condvar,
    wakers: Mutex<Vec<Waker>>,
}

/// Holds the commit lock until dropped.
#[derive(Debug)]
pub struct CommitGuard<'a> {
    lock: &'a CommitLock,
}

impl CommitLock {
    /// Takes the lock, blocking the thread while another commit holds it.
    pub fn lock(&self) -> CommitGuard<'_> {
        let mut locked = self.locked.lock().unwrap();
        while *locked {
            locked = self.released.wait(locked).unwrap();
        }
        *locked = true;
        CommitGuard { lock: self }
    }

    /// Takes the lock, yielding while another commit holds it.
    pub fn lock_async(&self) -> LockFuture<'_> {
        LockFuture { lock: self }
    }

    fn unlock(&self) {
        *self.locked.lock().unwrap() = false;
        self.released.notify_one();
        let wakers = std::mem::take(&mut *self.wakers.lock().unwrap());
        wakers.into_iter().for_each(Waker::wake);
    }
}

impl Drop for CommitGuard<'_> {
    fn drop(&mut self) {
        self.lock.unlock();
    }
}

/// See [`CommitLock::lock_async`].
#[derive(Debug)]
pub struct LockFuture<'a> {
    lock: &'a CommitLock,
}

impl<'a> Future for LockFuture<'a> {
    type Output = CommitGuard<'a>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<CommitGuard<'a>> {
        let mut locked = self.lock.locked.lock().unwrap();
        if !*locked {
            *locked = true;
            return Poll::Ready(CommitGuard { lock: self.lock });
        }
        // Registered under the state lock: `unlock` takes the wakers after clearing the
        // flag, so this waker is woken by the next release.
        self.lock.wakers.lock().unwrap().push(cx.waker().clone());
        Poll::Pending
    }
}
