//! Tasks and their handles: a spawned future, its result slot, and the handle the spawner
//! awaits (from any thread, from a tokio runtime) or blocks on (from a plain thread).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread;

/// A spawned task's future, type-erased; its output goes to the task's [`TaskHandle`].
pub type BoxedTask = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Where a task's result waits for its handle.
#[derive(Debug)]
struct JoinState<T> {
    slot: Mutex<JoinSlot<T>>,
    done: Condvar,
}

#[derive(Debug)]
struct JoinSlot<T> {
    /// The task's output, or the panic it died of.
    result: Option<thread::Result<T>>,
    waker: Option<Waker>,
}

impl<T> JoinState<T> {
    fn finish(&self, result: thread::Result<T>) {
        let mut slot = self.slot.lock().unwrap();
        slot.result = Some(result);
        if let Some(waker) = slot.waker.take() {
            waker.wake();
        }
        self.done.notify_all();
    }
}

/// The spawner's end of a task: a future of the task's output, or [`TaskHandle::wait`] to
/// block for it. A task that panicked passes its panic on to whoever takes the result.
#[derive(Debug)]
pub struct TaskHandle<T> {
    state: Arc<JoinState<T>>,
}

impl<T> TaskHandle<T> {
    /// Blocks the calling thread until the task has finished, and returns its output.
    pub fn wait(self) -> T {
        let mut slot = self.state.slot.lock().unwrap();
        loop {
            if let Some(result) = slot.result.take() {
                return unwrap_or_resume(result);
            }
            slot = self.state.done.wait(slot).unwrap();
        }
    }

    /// Whether the task has finished.
    pub fn is_finished(&self) -> bool {
        self.state.slot.lock().unwrap().result.is_some()
    }
}

fn unwrap_or_resume<T>(result: thread::Result<T>) -> T {
    match result {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

impl<T> Future for TaskHandle<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut slot = self.state.slot.lock().unwrap();
        match slot.result.take() {
            Some(result) => Poll::Ready(unwrap_or_resume(result)),
            None => {
                slot.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// Wraps `future` into a task whose output (or panic) lands in the returned handle.
pub fn task<F, T>(future: F) -> (BoxedTask, TaskHandle<T>)
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let state = Arc::new(JoinState {
        slot: Mutex::new(JoinSlot { result: None, waker: None }),
        done: Condvar::new(),
    });
    let finisher = Arc::clone(&state);
    let boxed = Box::pin(CatchPanic { future: Box::pin(future), state: Some(finisher) });
    (boxed, TaskHandle { state })
}

/// Polls the inner future, catching a panic so that one task's bug does not take its
/// worker (and every other task on it) down.
struct CatchPanic<T> {
    future: Pin<Box<dyn Future<Output = T> + Send>>,
    state: Option<Arc<JoinState<T>>>,
}

impl<T> Future for CatchPanic<T> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            this.future.as_mut().poll(cx)
        }));
        let result = match polled {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(value)) => Ok(value),
            Err(panic) => Err(panic),
        };
        if let Some(state) = this.state.take() {
            state.finish(result);
        }
        Poll::Ready(())
    }
}

/// Gives the worker back once: the task is polled again on the worker's next round.
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

/// The future of [`yield_now`].
#[derive(Debug)]
pub struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
