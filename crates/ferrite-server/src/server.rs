//! The server: a listening socket, one accepting task per worker, and a task per
//! connection, all on the database's workers. A connection's task receives into its read
//! buffer, decodes every whole request in it (`protocol::decode`), runs each in order
//! (`store.rs`) and sends the replies of the lot together: pipelined requests are answered
//! strictly in order, with one send per batch. Its socket calls go through its worker's ring
//! (`ferrite::sched::net`), beside the page reads its requests make.
//!
//! Bounds: at most `max_connections` connections (one more is closed at once); a connection
//! idle for `idle_timeout` is closed; a connection
//! buffers at most what the decoder may need (`Limits::buffer_max_bytes`: a request line,
//! or one item of `item_max_bytes`); a refused item's data is discarded as it arrives.
//!
//! Shutting down ([`Server::shut_down`]) stops the accepting tasks (each is handed a
//! connection of the server's own, which it drops), shuts every connection's socket (its
//! task's pending receive then ends), and waits for every task.

// `shutdown(2)` on a connection's socket, to end its task's pending receive.
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;

use ferrite::sched::{net, TaskHandle};
use ferrite::Db;

use crate::auth::{Attempt, Credentials};
use crate::backup::Backups;
use crate::protocol::{
    decode, write_error, Decoded, Limits, Request, StoreCommand, LINE_MAX_BYTES,
};
use crate::store::{PendingValue, Store, SLICE_BYTES};
use crate::sweep::Sweeper;

/// The tree that holds the items.
pub const ITEMS_TREE: &str = "memcache";

/// How long an accepting task waits after a failed accept.
const ACCEPT_BACKOFF: std::time::Duration = std::time::Duration::from_millis(10);

/// Most pipelined `set`s committed as one; fewer in a small buffer pool (a commit keeps the
/// pages it changed in memory until it is logged): one per 256 pages of the pool.
const SET_GROUP_MAX: usize = 64;

/// Bytes a connection asks the socket for at once.
const RECV_BYTES: usize = 64 << 10;

/// How a server runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where to listen (`127.0.0.1:11211` by default: not on the network unless told).
    pub listen: SocketAddr,
    /// Most connections at once.
    pub max_connections: usize,
    /// Largest item, bytes.
    pub item_max_bytes: usize,
    /// A connection that sends nothing for this long is closed (memcached's
    /// `idle_timeout`); `None`: never.
    pub idle_timeout: Option<std::time::Duration>,
    /// Cache mode: evict items to stay within the database's size budget
    /// (`Options::max_size_bytes`). Off (store mode), a full database refuses writes.
    pub evict: bool,
    /// memcached's text-protocol authentication (`auth.rs`): a connection must first `set`
    /// a `user password` of these. `None`: none asked.
    pub auth: Option<Arc<Credentials>>,
    /// Bytes of large items' slices read lately kept in memory, shared by every connection
    /// (`slices.rs`; 8 MiB by default).
    pub slice_cache_bytes: usize,
    /// Where `backup <name>` writes its copies (`backup.rs`): each is `<dir>/<name>`.
    /// `None`: the command is refused.
    pub backup_dir: Option<std::path::PathBuf>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 11211)),
            max_connections: 1024,
            item_max_bytes: 1 << 20,
            idle_timeout: None,
            evict: true,
            auth: None,
            slice_cache_bytes: 8 << 20,
            backup_dir: None,
        }
    }
}

/// What every task of a server shares.
#[derive(Debug)]
struct Shared {
    db: Arc<Db>,
    store: Store,
    limits: Limits,
    max_connections: usize,
    idle_timeout: Option<std::time::Duration>,
    auth: Option<Arc<Credentials>>,
    backups: Option<Backups>,
    /// Most pipelined `set`s committed as one (`SET_GROUP_MAX`, less in a small pool).
    set_group_max: usize,
    stopping: AtomicBool,
    /// Open connections' sockets, by number, for the shutdown.
    sockets: Mutex<HashMap<u64, RawFd>>,
    next_connection: AtomicU64,
    /// Connection tasks, reaped as they finish.
    tasks: Mutex<Vec<TaskHandle<()>>>,
}

/// A running server.
#[derive(Debug)]
pub struct Server {
    shared: Arc<Shared>,
    addr: SocketAddr,
    acceptors: Vec<TaskHandle<()>>,
    sweeper: TaskHandle<()>,
}

impl Server {
    /// Opens the items of `db` and starts listening. `db` must have workers with the
    /// io_uring engine for the fused I/O (other engines work, with blocking socket calls
    /// on the workers).
    pub fn start(db: Arc<Db>, config: &ServerConfig) -> io::Result<Server> {
        let fail = |e: ferrite::Error| io::Error::other(e.to_string());
        if db.worker_count() == 0 {
            return Err(io::Error::other("the server runs on the database's workers: none run"));
        }
        // Items past the in-leaf limit are objects: tasks may write them once the objects
        // tree exists.
        db.ready_objects().map_err(fail)?;
        let tree = db.tree(ITEMS_TREE).map_err(fail)?;
        let settings = vec![
            ("item_size_max", config.item_max_bytes.to_string()),
            ("maxconns", config.max_connections.to_string()),
            ("num_threads", db.worker_count().to_string()),
            ("evictions", if config.evict { "on" } else { "off" }.to_owned()),
            ("idle_timeout", config.idle_timeout.map_or(0, |d| d.as_secs()).to_string()),
            ("auth_enabled_ascii", if config.auth.is_some() { "yes" } else { "no" }.to_owned()),
        ];
        let sweeper = Sweeper::new(config.evict, db.space_usage().max_pages);
        let mut store = Store::open(tree, sweeper, settings).map_err(fail)?;
        if db.pool().tier().is_some() {
            store.tier = Some(Arc::downgrade(&db));
        }
        store.slices.set_budget(config.slice_cache_bytes);
        let listener = Arc::new(TcpListener::bind(config.listen)?);
        let addr = listener.local_addr()?;
        let limits = Limits { item_max_bytes: config.item_max_bytes, ..Limits::default() };
        let shared = Arc::new(Shared {
            db: Arc::clone(&db),
            store,
            limits,
            max_connections: config.max_connections,
            idle_timeout: config.idle_timeout,
            auth: config.auth.clone(),
            backups: config.backup_dir.clone().map(Backups::new),
            set_group_max: set_group_max(&db),
            stopping: AtomicBool::new(false),
            sockets: Mutex::new(HashMap::new()),
            next_connection: AtomicU64::new(0),
            tasks: Mutex::new(Vec::new()),
        });
        let sweeping = Arc::clone(&shared);
        let sweeper = db
            .spawn(async move { crate::sweep::run(&sweeping.store, &sweeping.db).await })
            .map_err(fail)?;
        let mut acceptors = Vec::new();
        for _ in 0..db.worker_count() {
            let (shared, listener) = (Arc::clone(&shared), Arc::clone(&listener));
            acceptors.push(db.spawn(accept_loop(shared, listener)).map_err(fail)?);
        }
        Ok(Server { shared, addr, acceptors, sweeper })
    }

    /// The address the server listens on (its port, when asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, ends every connection and waits for every task.
    pub fn shut_down(self) {
        let shared = &self.shared;
        shared.stopping.store(true, Ordering::Release);
        // (A write waiting for the sweeper to make room gives up now.)
        shared.store.sweeper.stop();
        // Each accepting task takes one of these and, seeing the flag, stops.
        let wakers: Vec<_> =
            self.acceptors.iter().filter_map(|_| TcpStream::connect(self.addr).ok()).collect();
        for handle in self.acceptors {
            handle.wait();
        }
        drop(wakers);
        for &fd in shared.sockets.lock().unwrap().values() {
            // SAFETY: `fd` is the socket of a connection whose task still owns it (it leaves
            // the map before its stream is dropped, under this lock); shutting it down ends
            // the task's receive, it closes nothing.
            unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
        }
        let tasks = std::mem::take(&mut *shared.tasks.lock().unwrap());
        for handle in tasks {
            handle.wait();
        }
        self.sweeper.wait();
    }

    /// What `stats` counts.
    pub fn counters(&self) -> &crate::store::Counters {
        &self.shared.store.counters
    }
}

async fn accept_loop(shared: Arc<Shared>, listener: Arc<TcpListener>) {
    loop {
        let accepted = net::accept(&listener).await;
        if shared.stopping.load(Ordering::Acquire) {
            return;
        }
        let counters = &shared.store.counters;
        let stream = match accepted {
            Ok(stream) => stream,
            Err(_) => {
                // Out of descriptors (EMFILE, ENFILE) or memory: the next accept would fail
                // at once too. Wait a moment (on the ring: the worker serves on) rather than
                // spin; memcached stops listening for a while likewise.
                counters.listen_disabled_num.fetch_add(1, Ordering::Relaxed);
                net::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let open = counters.curr_connections.load(Ordering::Relaxed);
        if open as usize >= shared.max_connections {
            counters.rejected_connections.fetch_add(1, Ordering::Relaxed);
            // memcached's words for it, then the connection closes.
            let (_, _) =
                net::send_all(&stream, b"ERROR Too many open connections\r\n".to_vec()).await;
            continue;
        }
        counters.curr_connections.fetch_add(1, Ordering::Relaxed);
        counters.total_connections.fetch_add(1, Ordering::Relaxed);
        let _ = stream.set_nodelay(true);
        let id = shared.next_connection.fetch_add(1, Ordering::Relaxed);
        shared.sockets.lock().unwrap().insert(id, stream.as_raw_fd());
        let task = serve_connection(Arc::clone(&shared), stream, id);
        match shared.db.spawn(task) {
            Ok(handle) => {
                let mut tasks = shared.tasks.lock().unwrap();
                tasks.retain(|t| !t.is_finished());
                tasks.push(handle);
            }
            Err(_) => {
                shared.sockets.lock().unwrap().remove(&id);
                counters.curr_connections.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

async fn serve_connection(shared: Arc<Shared>, stream: TcpStream, id: u64) {
    let _ = serve(&shared, &stream).await;
    // Out of the map before the stream closes: the shutdown never touches a closed socket.
    shared.sockets.lock().unwrap().remove(&id);
    drop(stream);
    shared.store.counters.curr_connections.fetch_sub(1, Ordering::Relaxed);
}

/// Serves one connection until the client closes it, sends `quit`, breaks the protocol in a
/// way memcached closes for, or the server stops.
async fn serve(shared: &Shared, stream: &TcpStream) -> io::Result<()> {
    let limits = &shared.limits;
    let counters = &shared.store.counters;
    let mut input: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; RECV_BYTES];
    let mut out: Vec<u8> = Vec::new();
    // Bytes of a refused item still to discard as they arrive.
    let mut swallow = 0usize;
    // While the request at the front waits for its line's newline: how much of `input` is
    // known to hold none. Only the new bytes are searched then, instead of decoding the
    // whole line again on every receive (a long `get` line sent a byte at a time would
    // otherwise cost time quadratic in its length).
    let mut no_newline_before: Option<usize> = None;
    let mut authenticated = shared.auth.is_none();
    // The hits of the request just run that go out in slices (`Store::execute_streaming`).
    let mut streams: Vec<PendingValue> = Vec::new();
    loop {
        chunk.resize(RECV_BYTES, 0);
        let (back, received) = match shared.idle_timeout {
            Some(limit) => net::recv_timeout(stream, chunk, limit).await,
            None => net::recv(stream, chunk).await,
        };
        chunk = back;
        let n = match received {
            Ok(n) => n,
            // Idle too long: the connection closes, as memcached closes it.
            Err(e) if e.kind() == io::ErrorKind::TimedOut => return Ok(()),
            Err(e) => return Err(e),
        };
        if n == 0 || shared.stopping.load(Ordering::Acquire) {
            return Ok(());
        }
        counters.bytes_read.fetch_add(n as u64, Ordering::Relaxed);
        let mut fresh = &chunk[..n];
        if swallow > 0 {
            let gone = swallow.min(fresh.len());
            swallow -= gone;
            fresh = &fresh[gone..];
        }
        input.extend_from_slice(fresh);
        if let Some(scanned) = no_newline_before {
            let still_none = !input[scanned..].contains(&b'\n');
            // The decoder decides past LINE_MAX_BYTES (close, or a `get` line it keeps
            // buffering): it is asked once the line crosses it, and skipped again only for
            // a line it already kept past it.
            let decided = input.len() <= LINE_MAX_BYTES || scanned > LINE_MAX_BYTES;
            if still_none && decided && input.len() <= limits.multiget_line_max_bytes {
                no_newline_before = Some(input.len());
                continue;
            }
            no_newline_before = None;
        }
        let mut at = 0;
        let mut open = true;
        // Pipelined small `set`s wait here to be committed together (`Store::set_many`),
        // before anything after them runs: replies stay in order.
        let mut sets: Vec<Request<'_>> = Vec::new();
        while at < input.len() {
            match decode(&input[at..], limits) {
                Decoded::NeedMore => break,
                Decoded::Request { request, consumed } => {
                    at += consumed;
                    if !authenticated {
                        authenticated = authenticate(shared, &request, &mut out);
                        continue;
                    }
                    if Store::groups(&request) {
                        sets.push(request);
                        if sets.len() == shared.set_group_max {
                            shared.store.set_many(&shared.db, &sets, &mut out).await;
                            sets.clear();
                        }
                        continue;
                    }
                    if !sets.is_empty() {
                        shared.store.set_many(&shared.db, &sets, &mut out).await;
                        sets.clear();
                    }
                    if let Request::Backup { name } = request {
                        backup(shared, name, &mut out).await;
                        continue;
                    }
                    let store = &shared.store;
                    if !store.execute_streaming(&request, &mut out, &mut streams).await {
                        open = false;
                        break;
                    }
                    if !streams.is_empty() {
                        // Sent now, before any later request may change what it streams.
                        let (back, sent) = send_streamed(
                            shared,
                            stream,
                            std::mem::take(&mut out),
                            std::mem::take(&mut streams),
                        )
                        .await;
                        out = back;
                        out.clear();
                        sent?;
                    }
                }
                Decoded::Error { reply, skip, close } => {
                    if !sets.is_empty() {
                        shared.store.set_many(&shared.db, &sets, &mut out).await;
                        sets.clear();
                    }
                    if let Some(error) = reply {
                        write_error(&mut out, error);
                    }
                    if close {
                        open = false;
                        break;
                    }
                    let here = skip.min(input.len() - at);
                    at += here;
                    swallow = skip - here;
                }
            }
        }
        if !sets.is_empty() {
            shared.store.set_many(&shared.db, &sets, &mut out).await;
        }
        drop(sets);
        input.drain(..at);
        if !input.is_empty() && !input.contains(&b'\n') {
            no_newline_before = Some(input.len());
        }
        if !out.is_empty() {
            counters.bytes_written.fetch_add(out.len() as u64, Ordering::Relaxed);
            let (back, sent) = net::send_all(stream, std::mem::take(&mut out)).await;
            out = back;
            out.clear();
            sent?;
        }
        if !open {
            return Ok(());
        }
        if input.len() > limits.buffer_max_bytes() {
            // (The decoder answers within this bound: it cannot happen; never grow past it.)
            return Ok(());
        }
    }
}

/// Sends `out`, with the rest of each streamed value in `streams` at its place in it: each
/// value a slice at a time (`SLICE_BYTES`), the next slice read while this one is sent. A
/// value replaced or deleted while it is streamed, or one whose read fails, cannot be taken
/// back: the connection is closed (an error), and the client sees a short reply, never
/// bytes of another value. Gives `out` back for reuse.
async fn send_streamed(
    shared: &Shared,
    socket: &TcpStream,
    out: Vec<u8>,
    streams: Vec<PendingValue>,
) -> (Vec<u8>, io::Result<()>) {
    let counters = &shared.store.counters;
    let mut from = 0;
    let mut buf = Vec::with_capacity(SLICE_BYTES);
    let mut next = Vec::with_capacity(SLICE_BYTES);
    for PendingValue { at, mut slices } in streams {
        buf.clear();
        buf.extend_from_slice(&out[from..at]);
        from = at;
        // What is sent while the next slice is read: first the reply up to the value's rest.
        loop {
            let left = (slices.len() - slices.position()) as usize;
            next.clear();
            next.resize(left.min(SLICE_BYTES), 0);
            counters.bytes_written.fetch_add(buf.len() as u64, Ordering::Relaxed);
            let read = shared.store.slices.read(&mut slices, &mut next);
            let ((back, sent), read) =
                both(net::send_all(socket, std::mem::take(&mut buf)), read).await;
            buf = back;
            if let Err(e) = sent {
                return (out, Err(e));
            }
            match read {
                Ok(Some(_)) => {}
                Ok(None) => {
                    return (
                        out,
                        Err(io::Error::other("the value was replaced while it was streamed")),
                    )
                }
                Err(e) => return (out, Err(io::Error::other(e.to_string()))),
            }
            std::mem::swap(&mut buf, &mut next);
            if buf.is_empty() {
                break;
            }
        }
    }
    counters.bytes_written.fetch_add((out.len() - from) as u64, Ordering::Relaxed);
    let rest = out[from..].to_vec();
    let (_, sent) = net::send_all(socket, rest).await;
    (out, sent)
}

/// Runs two futures at once in one task, until both are done.
async fn both<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    let (mut a, mut b) = (std::pin::pin!(a), std::pin::pin!(b));
    let (mut a_done, mut b_done) = (None, None);
    std::future::poll_fn(|cx| {
        if a_done.is_none() {
            if let Poll::Ready(v) = a.as_mut().poll(cx) {
                a_done = Some(v);
            }
        }
        if b_done.is_none() {
            if let Poll::Ready(v) = b.as_mut().poll(cx) {
                b_done = Some(v);
            }
        }
        if a_done.is_some() && b_done.is_some() {
            Poll::Ready((a_done.take().expect("done"), b_done.take().expect("done")))
        } else {
            Poll::Pending
        }
    })
    .await
}

/// `backup <name>`: `OK` once the copy is whole, else `SERVER_ERROR` and why.
async fn backup(shared: &Shared, name: &[u8], out: &mut Vec<u8>) {
    let counters = &shared.store.counters;
    let Some(backups) = &shared.backups else {
        out.extend_from_slice(
            b"SERVER_ERROR backups are off: start the server with --backup-dir DIR\r\n",
        );
        return;
    };
    match backups.run(&shared.db, name).await {
        Ok((target, report)) => {
            counters.backups.fetch_add(1, Ordering::Relaxed);
            log::info!(
                "backup into {}: {} bytes of pages and {} of log in {:.1} s",
                target.display(),
                report.page_file_bytes,
                report.log_bytes,
                report.seconds
            );
            out.extend_from_slice(b"OK\r\n");
        }
        Err(why) => {
            counters.backup_failures.fetch_add(1, Ordering::Relaxed);
            // One line: the reason must not break the protocol's framing.
            let why = why.replace(['\r', '\n'], " ");
            out.extend_from_slice(format!("SERVER_ERROR {why}\r\n").as_bytes());
        }
    }
}

/// A request on a connection not authenticated yet (`auth.rs`): only a `set` of
/// `user password` is taken. Returns whether the connection is authenticated now.
fn authenticate(shared: &Shared, request: &Request<'_>, out: &mut Vec<u8>) -> bool {
    let Some(credentials) = &shared.auth else { return true };
    let Request::Store { command: StoreCommand::Set, data, .. } = request else {
        out.extend_from_slice(b"CLIENT_ERROR unauthenticated\r\n");
        return false;
    };
    let counters = &shared.store.counters;
    counters.auth_cmds.fetch_add(1, Ordering::Relaxed);
    let attempt = credentials.check(data);
    out.extend_from_slice(match attempt {
        Attempt::Accepted => b"STORED\r\n".as_slice(),
        Attempt::BadFormat => b"CLIENT_ERROR bad authentication token format\r\n",
        Attempt::Refused => b"CLIENT_ERROR authentication failure\r\n",
    });
    if attempt != Attempt::Accepted {
        counters.auth_errors.fetch_add(1, Ordering::Relaxed);
    }
    attempt == Attempt::Accepted
}

/// `SET_GROUP_MAX`, or one set per 256 pages of a pool under 64 MiB; no groups at all in a
/// pool under 32 MiB. (With a 2 MiB pool, a full database and durability none, groups of
/// even two sets ran out of evictable frames: `PoolExhausted`, not yet understood.)
fn set_group_max(db: &Db) -> usize {
    let pool_pages = db.stats().map_or(0, |stats| stats.pool.pool_pages);
    if pool_pages < GROUP_MIN_POOL_PAGES {
        return 1;
    }
    ((pool_pages / 256) as usize).clamp(1, SET_GROUP_MAX)
}

/// Pools smaller than this (32 MiB) commit each set alone.
const GROUP_MIN_POOL_PAGES: u64 = 8192;
