//! Sockets for tasks (`ferrite::sched::net`): tasks on the workers accept connections and
//! echo what they receive through the workers' own rings, under every real engine (io_uring
//! queues the socket calls on the ring; the others make the blocking calls), and a receive
//! a task gives up on is cancelled without losing the worker or the connection.

mod common;

use std::future::Future;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::task::Context;

use common::{tiny, TempDir};
use ferrite::io::EngineKind;
use ferrite::sched::net;
use ferrite::{Db, Options};

/// Each connection's task: answers every message with its bytes upper-cased, until the
/// client closes; returns how many bytes it echoed.
async fn echo(listener: Arc<TcpListener>) -> std::io::Result<usize> {
    let stream = net::accept(&listener).await?;
    let mut buf = vec![0u8; 64];
    let mut echoed = 0;
    loop {
        buf.resize(64, 0);
        let (back, received) = net::recv(&stream, buf).await;
        buf = back;
        let n = received?;
        if n == 0 {
            return Ok(echoed);
        }
        buf.truncate(n);
        buf.make_ascii_uppercase();
        let (back, sent) = net::send_all(&stream, buf).await;
        buf = back;
        sent?;
        echoed += n;
    }
}

fn options(engine: EngineKind) -> Options {
    Options { workers: 2, engine: Some(engine), ..tiny(256) }
}

#[test]
fn tasks_accept_and_echo_through_their_workers_rings() {
    for engine in [EngineKind::IoUring, EngineKind::Psync] {
        let dir = TempDir::new().unwrap();
        let db = Db::open(dir.path(), options(engine)).unwrap();
        let listener = Arc::new(TcpListener::bind("127.0.0.1:0").unwrap());
        let addr = listener.local_addr().unwrap();
        let connections = 6;
        let handles: Vec<_> =
            (0..connections).map(|_| db.spawn(echo(Arc::clone(&listener))).unwrap()).collect();
        let clients: Vec<_> = (0..connections)
            .map(|c| {
                std::thread::spawn(move || {
                    let mut stream = TcpStream::connect(addr).unwrap();
                    let mut total = 0;
                    for round in 0..20 {
                        // Messages longer than the server's buffer, written in two pieces.
                        let message = format!("client {c} round {round}: {}", "abc".repeat(c + 20));
                        let (a, b) = message.as_bytes().split_at(message.len() / 3);
                        stream.write_all(a).unwrap();
                        stream.flush().unwrap();
                        stream.write_all(b).unwrap();
                        let mut reply = vec![0u8; message.len()];
                        stream.read_exact(&mut reply).unwrap();
                        assert_eq!(reply, message.to_ascii_uppercase().into_bytes());
                        total += message.len();
                    }
                    total
                })
            })
            .collect();
        let sent: usize = clients.into_iter().map(|c| c.join().unwrap()).sum();
        let echoed: usize = handles.into_iter().map(|h| h.wait().unwrap()).sum();
        assert_eq!(echoed, sent, "{engine:?}: every byte echoed once");
        let ops: u64 = db
            .worker_stats()
            .iter()
            .map(|s| s.socket_ops.load(std::sync::atomic::Ordering::Relaxed))
            .sum();
        if engine == EngineKind::IoUring {
            // An accept, and a receive and a send at least per message and connection.
            assert!(ops >= (connections * (1 + 2 * 20)) as u64, "{ops} socket operations");
        } else {
            assert_eq!(ops, 0, "{engine:?} makes the blocking calls");
        }
        db.close().unwrap();
    }
}

/// A receive polled once and dropped (as a task racing it against something else would):
/// the worker cancels it, the connection serves the next receive, and the database closes
/// while the client is still connected. (Without the cancellation the test fails: the
/// bytes go to the receive given up, or the close waits for it.)
#[test]
fn a_receive_given_up_is_cancelled() {
    let dir = TempDir::new().unwrap();
    let db = Db::open(dir.path(), options(EngineKind::IoUring)).unwrap();
    let listener = Arc::new(TcpListener::bind("127.0.0.1:0").unwrap());
    let addr = listener.local_addr().unwrap();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let task = db
        .spawn(async move {
            let stream = net::accept(&listener).await?;
            {
                let mut given_up = std::pin::pin!(net::recv(&stream, vec![0u8; 16]));
                let mut cx = Context::from_waker(std::task::Waker::noop());
                assert!(given_up.as_mut().poll(&mut cx).is_pending(), "nothing was sent yet");
            }
            ready_tx.send(()).unwrap();
            let (buf, n) = net::recv(&stream, vec![0u8; 16]).await;
            let n = n?;
            Ok::<_, std::io::Error>(buf[..n].to_vec())
        })
        .unwrap();
    let mut client = TcpStream::connect(addr).unwrap();
    ready_rx.recv().unwrap();
    // (The cancellation went out with the worker's batch before this is sent: the task
    // polled the next receive, which is queued behind it.)
    std::thread::sleep(std::time::Duration::from_millis(50));
    client.write_all(b"hello").unwrap();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || done_tx.send(task.wait()).unwrap());
    let received = done_rx.recv_timeout(std::time::Duration::from_secs(20)).unwrap_or_else(|_| {
        // The receive given up took the bytes (it was not cancelled): end the one waiting,
        // so that the test fails instead of hanging.
        client.shutdown(std::net::Shutdown::Both).unwrap();
        done_rx.recv().unwrap()
    });
    assert_eq!(received.unwrap(), b"hello", "the next receive got the bytes");
    // The client is still connected: a receive left in flight would hold its worker, and
    // the close, forever.
    let (closed_tx, closed_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || closed_tx.send(db.close()).unwrap());
    let closed = closed_rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the close hung: the receive given up is still in flight");
    closed.unwrap();
    drop(client);
}

/// A receive with a timeout gives up (`TimedOut`) when nothing comes, and the connection
/// serves the next receive; under io_uring (a timeout linked on the ring) and psync (the
/// blocking read with `SO_RCVTIMEO`).
#[test]
fn a_receive_with_a_timeout_gives_up_in_time() {
    for engine in [EngineKind::IoUring, EngineKind::Psync] {
        let dir = TempDir::new().unwrap();
        let db = Db::open(dir.path(), options(engine)).unwrap();
        let listener = Arc::new(TcpListener::bind("127.0.0.1:0").unwrap());
        let addr = listener.local_addr().unwrap();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
        let task = db
            .spawn(async move {
                let stream = net::accept(&listener).await?;
                let started = std::time::Instant::now();
                let timeout = std::time::Duration::from_millis(150);
                let (buf, first) = net::recv_timeout(&stream, vec![0u8; 16], timeout).await;
                let waited = started.elapsed();
                ready_tx.send(()).unwrap();
                let (buf, second) =
                    net::recv_timeout(&stream, buf, std::time::Duration::from_secs(20)).await;
                let n = second?;
                Ok::<_, std::io::Error>((first.map_err(|e| e.kind()), waited, buf[..n].to_vec()))
            })
            .unwrap();
        let mut client = TcpStream::connect(addr).unwrap();
        ready_rx.recv().unwrap();
        client.write_all(b"late").unwrap();
        let (first, waited, second) = task.wait().unwrap();
        assert_eq!(first, Err(std::io::ErrorKind::TimedOut), "{engine:?}");
        assert!(waited >= std::time::Duration::from_millis(140), "{engine:?}: {waited:?}");
        assert!(waited < std::time::Duration::from_secs(10), "{engine:?}: {waited:?}");
        assert_eq!(second, b"late", "{engine:?}");
        db.close().unwrap();
    }
}

/// Receives waiting on idle connections do not take the engine's room for disk I/O: with
/// more idle connections than the engine's depth on one worker, a task that must read
/// pages from the disk still gets them. (Socket calls once counted against the depth, and
/// such reads waited behind the idle receives for ever.)
#[test]
fn idle_receives_leave_the_disk_its_depth() {
    let dir = TempDir::new().unwrap();
    let depth = 4;
    let options = || Options { workers: 1, io_depth: depth, ..tiny(64) };
    let db = Db::open(dir.path(), options()).unwrap();
    let tree = db.tree("t").unwrap();
    for i in 0..3000u32 {
        tree.put(i.to_be_bytes(), [7u8; 200]).unwrap();
    }
    drop(tree);
    db.close().unwrap();
    // Reopened: a 64-page pool holds few of the tree's pages; reads go to the disk.
    let db = Db::open(dir.path(), options()).unwrap();
    let tree = db.tree("t").unwrap();
    let listener = Arc::new(TcpListener::bind("127.0.0.1:0").unwrap());
    let addr = listener.local_addr().unwrap();
    let idle = 3 * depth;
    let waiting: Vec<_> = (0..idle)
        .map(|_| {
            let listener = Arc::clone(&listener);
            db.spawn(async move {
                let stream = net::accept(&listener).await?;
                let (_, n) = net::recv(&stream, vec![0u8; 16]).await;
                n
            })
            .unwrap()
        })
        .collect();
    let clients: Vec<TcpStream> = (0..idle).map(|_| TcpStream::connect(addr).unwrap()).collect();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let reader = db
        .spawn(async move {
            let mut found = 0;
            for i in (0..3000u32).step_by(7) {
                found += usize::from(tree.get_async(&i.to_be_bytes()).await.unwrap().is_some());
            }
            found
        })
        .unwrap();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || done_tx.send(reader.wait()).unwrap());
    let found = done_rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the reads waited behind the idle receives");
    assert_eq!(found, 3000usize.div_ceil(7));
    drop(clients);
    for task in waiting {
        assert_eq!(task.wait().unwrap(), 0, "each peer hung up");
    }
    db.close().unwrap();
}

/// `net::sleep` waits its time on the ring without blocking its worker: on a database with
/// one worker, a task that yields a thousand times finishes while another sleeps.
#[test]
fn a_sleep_waits_on_the_ring_and_leaves_the_worker_free() {
    let dir = TempDir::new().unwrap();
    let db = Db::open(dir.path(), Options { workers: 1, ..options(EngineKind::IoUring) }).unwrap();
    let started = std::time::Instant::now();
    let sleeper = db
        .spawn(async move {
            net::sleep(std::time::Duration::from_millis(300)).await;
            started.elapsed()
        })
        .unwrap();
    let busy = db
        .spawn(async move {
            for _ in 0..1000 {
                ferrite::sched::yield_now().await;
            }
            started.elapsed()
        })
        .unwrap();
    let (slept, yielded) = (sleeper.wait(), busy.wait());
    assert!(slept >= std::time::Duration::from_millis(300), "woke early: {slept:?}");
    assert!(slept < std::time::Duration::from_secs(10), "{slept:?}");
    assert!(yielded < slept, "the worker was blocked: {yielded:?} against {slept:?}");
    // Off a worker, the thread sleeps.
    let off = std::time::Instant::now();
    ferrite::sched::block_on(net::sleep(std::time::Duration::from_millis(20)));
    assert!(off.elapsed() >= std::time::Duration::from_millis(20));
    db.close().unwrap();
}
