//! `backup <name>`: an online backup of the server's database (`Db::backup`) into one entry
//! of the directory the server was given (`ServerConfig::backup_dir`), so that a client
//! names a backup but never a path. The copy runs on a thread of its own (it blocks for as
//! long as the copy takes, which no worker may), while the connection that asked awaits it
//! as any other reply; every other connection goes on meanwhile. One backup runs at a time.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use ferrite::{BackupReport, Db};

/// Where a server keeps its backups, and whether one is running.
#[derive(Debug)]
pub struct Backups {
    dir: PathBuf,
    running: Arc<AtomicBool>,
}

/// Why a `backup` made none: the text of its `SERVER_ERROR`.
pub type Refusal = String;

impl Backups {
    /// Backups into entries of `dir`, which must be a directory.
    pub fn new(dir: PathBuf) -> Backups {
        Backups { dir, running: Arc::new(AtomicBool::new(false)) }
    }

    /// The directory backups go into.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Backs `db` up into `name` (checked by the decoder: one plain entry name) under the
    /// directory, on a thread of its own; the future ends with the copy.
    pub async fn run(&self, db: &Arc<Db>, name: &[u8]) -> Result<(PathBuf, BackupReport), Refusal> {
        let name = std::str::from_utf8(name).map_err(|_| "a backup name is ASCII".to_owned())?;
        let target = self.dir.join(name);
        if self.running.swap(true, Ordering::AcqRel) {
            return Err("a backup is running already; try again when it has ended".into());
        }
        let running = Running(Arc::clone(&self.running));
        if target.exists() {
            return Err(format!("{} exists already: name a new backup", target.display()));
        }
        let (db, to) = (Arc::clone(db), target.clone());
        let report = on_thread(move || {
            let _running = running;
            db.backup(&to)
        })
        .await?;
        report.map(|report| (target, report)).map_err(|e| format!("backup failed: {e}"))
    }
}

/// Clears the running flag when the backup's thread ends (not when the connection that asked
/// goes away: the copy goes on until it is done).
struct Running(Arc<AtomicBool>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Runs `work` on a new thread; the future is its result.
fn on_thread<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> impl Future<Output = Result<T, Refusal>> {
    let slot = Arc::new(Mutex::new(Slot { result: None, waker: None, gone: false }));
    let filled = Arc::clone(&slot);
    let started = std::thread::Builder::new().name("ferrite-backup".into()).spawn(move || {
        // A panic in `work` leaves the result empty: the guard's drop says the thread ended.
        let guard = Filled(filled);
        let value = work();
        let mut slot = guard.0.lock().unwrap();
        slot.result = Some(value);
    });
    OnThread { slot, started: started.map(drop).map_err(|e| format!("starting its thread: {e}")) }
}

struct Slot<T> {
    result: Option<T>,
    waker: Option<Waker>,
    /// The thread ended (with a result or a panic).
    gone: bool,
}

/// Marks the slot's thread gone and wakes its waiter when the thread ends, however it ends.
struct Filled<T>(Arc<Mutex<Slot<T>>>);

impl<T> Drop for Filled<T> {
    fn drop(&mut self) {
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        slot.gone = true;
        if let Some(waker) = slot.waker.take() {
            waker.wake();
        }
    }
}

struct OnThread<T> {
    slot: Arc<Mutex<Slot<T>>>,
    started: Result<(), Refusal>,
}

impl<T> Future for OnThread<T> {
    type Output = Result<T, Refusal>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Err(e) = &self.started {
            return Poll::Ready(Err(e.clone()));
        }
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(value) = slot.result.take() {
            return Poll::Ready(Ok(value));
        }
        if slot.gone {
            return Poll::Ready(Err("the backup's thread panicked".into()));
        }
        slot.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_result_and_a_panic_both_end_the_future() {
        let value = ferrite::sched::block_on(on_thread(|| 6 * 7));
        assert_eq!(value, Ok(42));
        let panicked = ferrite::sched::block_on(on_thread(|| -> u32 { panic!("on purpose") }));
        assert_eq!(panicked, Err("the backup's thread panicked".to_owned()));
    }
}
