//! Sockets for tasks: accepts, receives and sends that go through the worker's own ring
//! (`IoEngine::queue_socket`) beside its page reads and writes, so that a task serving a
//! connection waits for the network and for the disk in the same loop, with no thread
//! hand-off: the "fused I/O" a server on Ferrite is built on (`docs/design.md`, "The
//! server").
//!
//! Each call hands its buffer to the worker, which owns it until the kernel is done with it,
//! even if the task is dropped meanwhile (the operation is then cancelled). Off a worker, or
//! on an engine that queues no socket operations (only io_uring does), each call is the
//! blocking system call instead (on a worker that blocks the worker: a server wants
//! io_uring).

// One `from_raw_fd`: the descriptor an accept on the ring returned.
#![allow(unsafe_code)]

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd};

use super::task::yield_now;
use super::worker::{start_socket, NetKind, NetRefusal};

/// Runs socket operation `kind` on `fd` with `buf` through the worker's ring, or with
/// `blocking` where it cannot.
async fn run(
    kind: NetKind,
    fd: std::os::fd::RawFd,
    mut buf: Vec<u8>,
    blocking: impl FnOnce(&mut Vec<u8>) -> io::Result<usize>,
) -> (Vec<u8>, io::Result<usize>) {
    loop {
        match start_socket(kind, fd, buf) {
            Ok(transfer) => return transfer.await,
            Err((back, NetRefusal::Full)) => {
                buf = back;
                yield_now().await;
            }
            Err((mut back, NetRefusal::Blocking)) => {
                let result = blocking(&mut back);
                return (back, result);
            }
        }
    }
}

/// Waits `duration` without blocking the worker (a timer on its ring; off the ring, or on
/// an engine without one, the thread sleeps).
pub async fn sleep(duration: std::time::Duration) {
    let (_, result) = run(NetKind::Sleep(duration), -1, Vec::new(), |_| {
        std::thread::sleep(duration);
        Ok(0)
    })
    .await;
    // (A timer that fires completes with ETIME; a cancelled one, at shutdown, early.)
    let _ = result;
}

/// Accepts a connection on `listener` (a blocking listener: off the ring the call waits).
pub async fn accept(listener: &TcpListener) -> io::Result<TcpStream> {
    let (_, result) = run(NetKind::Accept, listener.as_raw_fd(), Vec::new(), |_| {
        listener.accept().map(|(stream, _)| {
            let fd = std::os::fd::IntoRawFd::into_raw_fd(stream);
            fd as usize
        })
    })
    .await;
    let fd = result? as std::os::fd::RawFd;
    // SAFETY: `fd` is a connected socket the kernel just made for this call (an accept's
    // result), owned by nobody else.
    Ok(unsafe { TcpStream::from_raw_fd(fd) })
}

/// Receives into `buf` (at most its length; the caller sizes it); returns the buffer and
/// the bytes received, 0 once the peer closed its side.
pub async fn recv(stream: &TcpStream, buf: Vec<u8>) -> (Vec<u8>, io::Result<usize>) {
    run(NetKind::Recv(None), stream.as_raw_fd(), buf, |buf| (&*stream).read(buf)).await
}

/// [`recv`] that gives up after `timeout` with nothing received: an error of kind
/// `TimedOut` (on the ring, a timeout linked to the receive; off it, `SO_RCVTIMEO`).
pub async fn recv_timeout(
    stream: &TcpStream,
    buf: Vec<u8>,
    timeout: std::time::Duration,
) -> (Vec<u8>, io::Result<usize>) {
    let blocking = |buf: &mut Vec<u8>| {
        stream.set_read_timeout(Some(timeout))?;
        let read = (&*stream).read(buf);
        stream.set_read_timeout(None)?;
        read
    };
    let (buf, result) = run(NetKind::Recv(Some(timeout)), stream.as_raw_fd(), buf, blocking).await;
    let result = result.map_err(|e| match e.raw_os_error() {
        // (The ring cancels the receive when its linked timeout fires; the blocking read
        // says EAGAIN.)
        Some(libc::ECANCELED) | Some(libc::EAGAIN) => {
            io::Error::new(io::ErrorKind::TimedOut, "nothing received within the timeout")
        }
        _ => e,
    });
    (buf, result)
}

/// Sends from `buf` (its whole length at most; maybe less: see [`send_all`]); returns the
/// buffer and the bytes sent.
pub async fn send(stream: &TcpStream, buf: Vec<u8>) -> (Vec<u8>, io::Result<usize>) {
    run(NetKind::Send, stream.as_raw_fd(), buf, |buf| (&*stream).write(buf)).await
}

/// Sends all of `buf`, in as many sends as it takes; returns the buffer.
pub async fn send_all(stream: &TcpStream, mut buf: Vec<u8>) -> (Vec<u8>, io::Result<()>) {
    let mut sent = 0;
    while sent < buf.len() {
        // (A rest is moved to the front: the worker owns whole buffers.)
        if sent > 0 {
            buf.drain(..sent);
            sent = 0;
        }
        let (back, result) = send(stream, buf).await;
        buf = back;
        match result {
            Ok(0) => {
                return (
                    buf,
                    Err(io::Error::new(io::ErrorKind::WriteZero, "the peer took nothing")),
                )
            }
            Ok(n) => sent += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (buf, Err(e)),
        }
    }
    (buf, Ok(()))
}
