//! The measured part's io_uring client (`--client ring`): every connection driven from one
//! thread through one io_uring, so that the load generator's cost per request is a
//! submission rather than a thread's sleep and wake-up. It takes less CPU than the blocking
//! client (about 8 µs per request in closed loop against 30–40 on these 2 cores), but one
//! thread delays every connection whenever it is not running: in open loop, out of memory,
//! its p99 was worse than the blocking client's (see docs/benchmarks.md), so the blocking
//! client stays the default.
//!
//! Each connection has at most one request in flight: its send and its reply's receive are
//! queued together (one submission), then more receives until the reply is whole. An idle connection waits in a heap ordered by when its next request is due:
//! in open loop its Poisson arrival time (a request due while its connection is busy goes as
//! soon as the connection is free, and its lateness counts), in closed loop at once. The
//! thread sleeps in `io_uring_enter` until a completion or the next due time, 10 ms at most
//! (to see the phase change).
//!
//! Buffers handed to the kernel (a connection's request and reply buffers) are neither
//! moved nor resized while an operation on them is in flight, and the ring is only dropped
//! once no operation is (at the end every connection's request is waited for, or its socket
//! shut down so that the receive completes).

#![allow(unsafe_code)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use io_uring::{opcode, types, IoUring};

use super::{check_value, key_name, value_of, Counts, ServeConfig};
use crate::error::BenchError;
use crate::gen::rng::Rng;
use crate::gen::zipf::Zipf;
use crate::measure::cpu::CpuTime;
use crate::measure::phase::{MEASURE, STOP};
use crate::runner::record;

/// How long the driver sleeps at most between looks at the phase.
const MAX_SLEEP: Duration = Duration::from_millis(10);
/// How long the driver waits at the end for the requests in flight before it shuts their
/// sockets down.
const DRAIN: Duration = Duration::from_secs(10);
/// Room a receive is given at least.
const RECV_ROOM: usize = 16 << 10;

/// The request a connection has in flight.
#[derive(Debug, Clone, Copy)]
struct Pending {
    key: u64,
    get: bool,
    /// When it was due, ns on the driver's clock: latency counts from here.
    intended_ns: u64,
    /// Started while measuring: counted.
    measured: bool,
}

/// One connection's state.
struct Link {
    stream: TcpStream,
    rng: Rng,
    /// The request's bytes, and how many were sent.
    out: Vec<u8>,
    sent: usize,
    /// Reply bytes received, `filled` of them.
    reply: Vec<u8>,
    filled: usize,
    pending: Option<Pending>,
    /// When its next request is due (open loop), ns on the driver's clock.
    next_due_ns: u64,
    version: u32,
}

/// What a reply buffer holds so far.
#[derive(Debug, PartialEq)]
enum Reply {
    /// Not whole yet: at least this many bytes in all are needed.
    Partial(usize),
    /// A GET's hit: the value's place in the buffer, and the reply's length.
    Hit { value: std::ops::Range<usize>, len: usize },
    /// A GET's miss or a stored SET (`true`), or a SET refused for lack of memory (`false`).
    Done { ok: bool, len: usize },
}

/// Parses the reply to a GET (`get`) or a SET at the start of `bytes`.
fn parse_reply(bytes: &[u8], get: bool) -> Result<Reply, String> {
    let Some(eol) = bytes.windows(2).position(|w| w == b"\r\n") else {
        return Ok(Reply::Partial(bytes.len() + 1));
    };
    let line = &bytes[..eol];
    let text = || String::from_utf8_lossy(line).into_owned();
    if !get {
        return match line {
            b"STORED" => Ok(Reply::Done { ok: true, len: eol + 2 }),
            _ if line.starts_with(b"SERVER_ERROR out of memory") => {
                Ok(Reply::Done { ok: false, len: eol + 2 })
            }
            _ => Err(format!("a SET was answered {:?}", text())),
        };
    }
    if line == b"END" {
        return Ok(Reply::Done { ok: true, len: eol + 2 });
    }
    let len: usize = std::str::from_utf8(line)
        .ok()
        .and_then(|l| l.strip_prefix("VALUE "))
        .and_then(|rest| rest.split(' ').nth(2))
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("a GET was answered {:?}", text()))?;
    let start = eol + 2;
    let whole = start + len + 2 + b"END\r\n".len();
    if bytes.len() < whole {
        return Ok(Reply::Partial(whole));
    }
    if &bytes[start + len..whole] != b"\r\nEND\r\n" {
        return Err(format!("a value of {len} bytes was not followed by END"));
    }
    Ok(Reply::Hit { value: start..start + len, len: whole })
}

/// A gap of a Poisson process at `rate` per second, ns.
fn exponential_gap_ns(rng: &mut Rng, rate: f64) -> u64 {
    let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    (-(1.0 - u).ln() / rate * 1e9) as u64
}

/// `user_data` of an operation: the connection's index, and whether it is a receive.
fn tag(index: usize, recv: bool) -> u64 {
    (index as u64) << 1 | u64::from(recv)
}

/// The driver: runs `config.connections` connections to `addr` until the phase says stop;
/// the counts of all of them, with this thread's CPU while measuring.
pub(super) fn drive(
    addr: SocketAddr,
    config: &ServeConfig,
    phase: &AtomicU8,
    zipf: Option<&Zipf>,
) -> Result<Counts, BenchError> {
    let io = |context: &str| {
        let context = context.to_owned();
        move |source| BenchError::Io { context, source }
    };
    let mut links = Vec::with_capacity(config.connections);
    for index in 0..config.connections {
        let stream = TcpStream::connect(addr).map_err(io(&format!("connecting to {addr}")))?;
        let _ = stream.set_nodelay(true);
        links.push(Link {
            stream,
            rng: Rng::stream(config.seed, index as u64),
            out: Vec::new(),
            sent: 0,
            reply: vec![0; RECV_ROOM],
            filled: 0,
            pending: None,
            next_due_ns: 0,
            version: (index as u32) << 20,
        });
    }
    let entries = (2 * config.connections).next_power_of_two().max(64) as u32;
    let mut ring = IoUring::new(entries).map_err(io("making the client's io_uring"))?;
    let clock = Instant::now();
    let now_ns = || clock.elapsed().as_nanos() as u64;
    let per_connection = config.rate.map(|rate| rate / config.connections as f64);
    let mut counts = Counts::new();
    let mut cpu_from: Option<CpuTime> = None;
    let mut idle: BinaryHeap<Reverse<(u64, usize)>> =
        (0..links.len()).map(|i| Reverse((0, i))).collect();
    // Requests in flight, and operations (sends and receives) the kernel holds.
    let mut in_flight = 0usize;
    let mut ops = 0usize;
    let mut stopping_since: Option<Instant> = None;
    if let Some(rate) = per_connection {
        // Each connection's first request after a gap of its own, as every later one.
        idle = idle
            .into_iter()
            .map(|Reverse((_, index))| {
                let link = &mut links[index];
                link.next_due_ns = exponential_gap_ns(&mut link.rng, rate);
                Reverse((link.next_due_ns, index))
            })
            .collect();
    }
    let outcome = 'main: loop {
        let now_phase = phase.load(Ordering::Acquire);
        if now_phase == MEASURE && cpu_from.is_none() {
            cpu_from = Some(CpuTime::this_thread());
        }
        if now_phase == STOP {
            let since = *stopping_since.get_or_insert_with(Instant::now);
            if in_flight == 0 {
                break Ok(());
            }
            if since.elapsed() > DRAIN {
                break Err(BenchError::Store(
                    format!("{in_flight} requests still unanswered {DRAIN:?} after the end").into(),
                ));
            }
        } else {
            // Start every request that is due.
            let now = now_ns();
            while let Some(&Reverse((due, index))) = idle.peek() {
                if due > now {
                    break;
                }
                idle.pop();
                let link = &mut links[index];
                let intended_ns = match per_connection {
                    Some(_) => due,
                    None => now,
                };
                let key = match zipf {
                    Some(zipf) => zipf.sample(&mut link.rng),
                    None => link.rng.below(config.keys),
                };
                let get = link.rng.below(100) < u64::from(config.get_percent);
                link.out.clear();
                if get {
                    link.out.extend_from_slice(format!("get {}\r\n", key_name(key)).as_bytes());
                } else {
                    link.version = link.version.wrapping_add(1);
                    let value = value_of(key, link.version, config.value_size);
                    link.out.extend_from_slice(
                        format!("set {} 0 0 {}\r\n", key_name(key), value.len()).as_bytes(),
                    );
                    link.out.extend_from_slice(&value);
                    link.out.extend_from_slice(b"\r\n");
                }
                link.sent = 0;
                link.filled = 0;
                link.pending =
                    Some(Pending { key, get, intended_ns, measured: now_phase == MEASURE });
                // (Counted as each is queued: the drain at the end waits for exactly those.)
                let queued = push_send(&mut ring, link, index)
                    .inspect(|()| ops += 1)
                    .and_then(|()| push_recv(&mut ring, link, index, 0))
                    .inspect(|()| ops += 1);
                if let Err(e) = queued {
                    break 'main Err(e);
                }
                in_flight += 1;
            }
        }
        // Sleep until a completion, or the next due request, 10 ms at most.
        let wait = match idle.peek() {
            Some(&Reverse((due, _))) if now_phase != STOP => {
                Duration::from_nanos(due.saturating_sub(now_ns())).min(MAX_SLEEP)
            }
            _ => MAX_SLEEP,
        };
        if let Some(since) = stopping_since {
            if since.elapsed() > DRAIN / 2 {
                // The server may never answer: end the receives.
                for link in links.iter().filter(|l| l.pending.is_some()) {
                    let _ = link.stream.shutdown(std::net::Shutdown::Both);
                }
            }
        }
        let ts = types::Timespec::new().sec(wait.as_secs()).nsec(wait.subsec_nanos());
        let args = types::SubmitArgs::new().timespec(&ts);
        match ring.submitter().submit_with_args(1, &args) {
            Ok(_) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR | libc::EBUSY)) => {
            }
            Err(e) => {
                break Err(BenchError::Io {
                    context: "waiting on the client's io_uring".into(),
                    source: e,
                })
            }
        }
        let completions: Vec<(u64, i32)> =
            ring.completion().map(|cqe| (cqe.user_data(), cqe.result())).collect();
        // (Every completion taken is the kernel's no more, handled or not.)
        ops -= completions.len();
        let mut failed = None;
        for (data, result) in completions {
            let (index, recv) = ((data >> 1) as usize, data & 1 == 1);
            let link = &mut links[index];
            let done = match complete(&mut ring, link, index, recv, result, &mut ops)
                .and_then(|()| finished(link, config))
            {
                Ok(Some(done)) => done,
                Ok(None) => continue,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            };
            {
                in_flight -= 1;
                let pending = link.pending.take().expect("a request was in flight");
                if pending.measured {
                    record(&mut counts.latency_ns, now_ns().saturating_sub(pending.intended_ns));
                    counts.requests += 1;
                    match (pending.get, done) {
                        (true, hit) => {
                            counts.gets += 1;
                            counts.hits += u64::from(hit);
                        }
                        (false, stored) => {
                            counts.sets += 1;
                            counts.set_errors += u64::from(!stored);
                        }
                    }
                }
                link.next_due_ns = match per_connection {
                    Some(rate) => link.next_due_ns + exponential_gap_ns(&mut link.rng, rate),
                    None => 0,
                };
                idle.push(Reverse((link.next_due_ns, index)));
            }
        }
        if let Some(e) = failed {
            break Err(e);
        }
    };
    // Nothing of the ring's may be in flight when it and the buffers go: shut every socket
    // down and take the last completions (a failed run may leave some).
    if ops > 0 {
        for link in &links {
            let _ = link.stream.shutdown(std::net::Shutdown::Both);
        }
        let deadline = Instant::now() + DRAIN;
        while ops > 0 && Instant::now() < deadline {
            let ts = types::Timespec::new().nsec(MAX_SLEEP.subsec_nanos());
            let _ = ring.submitter().submit_with_args(1, &types::SubmitArgs::new().timespec(&ts));
            ops -= ring.completion().count().min(ops);
        }
        if ops > 0 {
            // The kernel could still write into the buffers: never free them.
            std::mem::forget(links);
            std::mem::forget(ring);
        }
    }
    outcome?;
    if let Some(from) = cpu_from {
        counts.cpu = CpuTime::this_thread().since(from);
    }
    Ok(counts)
}

/// Queues the send of the rest of `link`'s request.
fn push_send(ring: &mut IoUring, link: &mut Link, index: usize) -> Result<(), BenchError> {
    let rest = &link.out[link.sent..];
    let sqe =
        opcode::Send::new(types::Fd(link.stream.as_raw_fd()), rest.as_ptr(), rest.len() as u32)
            .build()
            .user_data(tag(index, false));
    push(ring, &sqe)
}

/// Queues a receive into `link`'s reply buffer after what it holds, with room for at least
/// `needed` bytes in all.
fn push_recv(
    ring: &mut IoUring,
    link: &mut Link,
    index: usize,
    needed: usize,
) -> Result<(), BenchError> {
    // (Resized only here, with no operation on the buffer in flight.)
    let room = needed.max(link.filled + RECV_ROOM);
    if link.reply.len() < room {
        link.reply.resize(room, 0);
    }
    let free = &mut link.reply[link.filled..];
    let sqe =
        opcode::Recv::new(types::Fd(link.stream.as_raw_fd()), free.as_mut_ptr(), free.len() as u32)
            .build()
            .user_data(tag(index, true));
    push(ring, &sqe)
}

fn push(ring: &mut IoUring, sqe: &io_uring::squeue::Entry) -> Result<(), BenchError> {
    // SAFETY: the buffer `sqe` points into is a connection's `out` or `reply`, which stays
    // in place (neither moved, resized nor freed) until this operation's completion is
    // taken, as the module's notes say.
    let pushed = unsafe { ring.submission().push(sqe) };
    if pushed.is_err() {
        // At most two entries per connection, and the ring has room for that: flush it.
        ring.submit().map_err(|source| BenchError::Io { context: "submitting".into(), source })?;
        // SAFETY: as above.
        unsafe { ring.submission().push(sqe) }
            .map_err(|_| BenchError::Store("the client's io_uring stayed full".into()))?;
    }
    Ok(())
}

/// Takes one completion of `link`'s: queues what follows it (the rest of a send, more of
/// the reply), counting what it queues in `ops`.
fn complete(
    ring: &mut IoUring,
    link: &mut Link,
    index: usize,
    recv: bool,
    result: i32,
    ops: &mut usize,
) -> Result<(), BenchError> {
    if result == -libc::EINTR || result == -libc::EAGAIN {
        let queued =
            if recv { push_recv(ring, link, index, 0) } else { push_send(ring, link, index) };
        return queued.inspect(|()| *ops += 1);
    }
    if result < 0 {
        let source = std::io::Error::from_raw_os_error(-result);
        let context = if recv { "receiving a reply" } else { "sending a request" };
        return Err(BenchError::Io { context: context.into(), source });
    }
    let n = result as usize;
    if !recv {
        link.sent += n;
        if link.sent < link.out.len() {
            return push_send(ring, link, index).inspect(|()| *ops += 1);
        }
        return Ok(());
    }
    if n == 0 {
        return Err(BenchError::Store("the server closed the connection".into()));
    }
    link.filled += n;
    let get = link.pending.expect("a request in flight").get;
    match parse_reply(&link.reply[..link.filled], get) {
        Ok(Reply::Partial(needed)) => push_recv(ring, link, index, needed).inspect(|()| *ops += 1),
        Ok(_) => Ok(()),
        Err(e) => Err(BenchError::Store(e.into())),
    }
}

/// If `link`'s reply is whole: whether it was a hit (GET) or stored (SET). The value of a
/// hit is checked.
fn finished(link: &mut Link, config: &ServeConfig) -> Result<Option<bool>, BenchError> {
    let Some(pending) = link.pending else { return Ok(None) };
    if link.sent < link.out.len() || link.filled == 0 {
        return Ok(None);
    }
    let (ok, len) = match parse_reply(&link.reply[..link.filled], pending.get) {
        Ok(Reply::Partial(_)) => return Ok(None),
        Ok(Reply::Done { ok, len }) => (ok && !pending.get, len),
        Ok(Reply::Hit { value, len }) => {
            check_value(pending.key, &link.reply[value], config.value_size)
                .map_err(|e| BenchError::Content(format!("GET {}: {e}", key_name(pending.key))))?;
            (true, len)
        }
        Err(e) => return Err(BenchError::Store(e.into())),
    };
    if len != link.filled {
        return Err(BenchError::Store(
            format!("{} bytes after a whole reply", link.filled - len).into(),
        ));
    }
    // (A GET's `Done` is a miss; a SET's is stored or refused.)
    Ok(Some(ok))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_parse_whole_and_in_pieces() {
        let hit = b"VALUE key:0000000001 0 5\r\nhello\r\nEND\r\n";
        for cut in 0..hit.len() {
            match parse_reply(&hit[..cut], true).unwrap() {
                Reply::Partial(needed) => assert!(needed > cut, "{cut}"),
                other => panic!("{cut}: {other:?}"),
            }
        }
        assert_eq!(parse_reply(hit, true).unwrap(), Reply::Hit { value: 26..31, len: hit.len() });
        assert_eq!(parse_reply(b"END\r\n", true).unwrap(), Reply::Done { ok: true, len: 5 });
        assert_eq!(parse_reply(b"STORED\r\n", false).unwrap(), Reply::Done { ok: true, len: 8 });
        let refused = b"SERVER_ERROR out of memory storing object\r\n";
        assert_eq!(
            parse_reply(refused, false).unwrap(),
            Reply::Done { ok: false, len: refused.len() }
        );
        assert!(parse_reply(b"ERROR\r\n", false).unwrap_err().contains("ERROR"));
        assert!(parse_reply(b"STORED\r\n", true).unwrap_err().contains("a GET was answered"));
        let bad = b"VALUE k 0 5\r\nhelloXXEND\r\n";
        assert!(parse_reply(bad, true).unwrap_err().contains("not followed by END"));
    }

    /// A server answering every request with ERROR: the driver stops with that, at once,
    /// with requests of other connections still in flight.
    #[test]
    fn a_wrong_answer_ends_the_run_with_it() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    while matches!(stream.read(&mut buf), Ok(n) if n > 0) {
                        if stream.write_all(b"ERROR\r\n").is_err() {
                            return;
                        }
                    }
                });
            }
        });
        let config = ServeConfig {
            server: Some(addr),
            keys: 100,
            connections: 8,
            ..ServeConfig::new(super::super::ServeStore::Memcached)
        };
        let phase = AtomicU8::new(crate::measure::phase::WARMUP);
        let start = Instant::now();
        let error = drive(addr, &config, &phase, None).err().expect("the run fails");
        assert!(error.to_string().contains("was answered \"ERROR\""), "{error}");
        assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
    }
}
