//! The server end to end over loopback TCP: memcached's text and meta commands with their
//! exact replies, pipelined requests split at odd places, items past the engine's in-leaf
//! limit, a refused oversized item, and a restart that keeps the items.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use ferrite::{Db, Options};
use ferrite_server::{Server, ServerConfig};

fn options() -> Options {
    Options { workers: 2, pool_bytes: 8 << 20, create_if_missing: true, ..Options::default() }
}

fn start(dir: &std::path::Path) -> (Arc<Db>, Server) {
    let db = Arc::new(Db::open(dir, options()).unwrap());
    let config =
        ServerConfig { listen: SocketAddr::from(([127, 0, 0, 1], 0)), ..ServerConfig::default() };
    let server = Server::start(Arc::clone(&db), &config).unwrap();
    (db, server)
}

fn stop(db: Arc<Db>, server: Server) {
    server.shut_down();
    Arc::into_inner(db).expect("no task holds the database").close().unwrap();
}

struct Client(TcpStream);

impl Client {
    fn connect(server: &Server) -> Client {
        let stream = TcpStream::connect(server.local_addr()).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Client(stream)
    }

    /// Sends `request` and checks that exactly `reply` comes back.
    fn expect(&mut self, request: &[u8], reply: &[u8]) {
        self.0.write_all(request).unwrap();
        self.read_exactly(request, reply);
    }

    fn read_exactly(&mut self, request: &[u8], reply: &[u8]) {
        let mut got = vec![0u8; reply.len()];
        if let Err(e) = self.0.read_exact(&mut got) {
            panic!(
                "{:?}: {e} (expected {:?})",
                String::from_utf8_lossy(request),
                String::from_utf8_lossy(reply)
            );
        }
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(reply),
            "reply to {:?}",
            String::from_utf8_lossy(request)
        );
    }

    /// Sends `request` and returns the reply's first line.
    fn line(&mut self, request: &[u8]) -> String {
        self.0.write_all(request).unwrap();
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        while !line.ends_with(b"\r\n") {
            self.0.read_exact(&mut byte).unwrap();
            line.push(byte[0]);
        }
        String::from_utf8(line).unwrap()
    }
}

/// The cas of `key`, read with `gets`.
fn cas_of(client: &mut Client, key: &str) -> u64 {
    let line = client.line(format!("gets {key}\r\n").as_bytes());
    let fields: Vec<&str> = line.trim_end().split(' ').collect();
    assert_eq!(fields[0], "VALUE", "{line}");
    let len: usize = fields[3].parse().unwrap();
    let mut rest = vec![0u8; len + 2 + 5];
    client.0.read_exact(&mut rest).unwrap();
    assert!(rest.ends_with(b"\r\nEND\r\n"));
    fields[4].parse().unwrap()
}

#[test]
fn text_commands_answer_as_memcached_does() {
    let dir = tempfile::tempdir().unwrap();
    let (db, server) = start(dir.path());
    let mut c = Client::connect(&server);
    c.expect(b"get nothing\r\n", b"END\r\n");
    c.expect(b"set k 5 0 3\r\nabc\r\n", b"STORED\r\n");
    c.expect(b"get k\r\n", b"VALUE k 5 3\r\nabc\r\nEND\r\n");
    c.expect(b"add k 0 0 1\r\nx\r\n", b"NOT_STORED\r\n");
    c.expect(b"add k2 0 0 1\r\nx\r\n", b"STORED\r\n");
    c.expect(b"replace nope 0 0 1\r\nx\r\n", b"NOT_STORED\r\n");
    c.expect(b"replace k2 7 0 2\r\nyy\r\n", b"STORED\r\n");
    c.expect(b"append k 9 0 2\r\nde\r\n", b"STORED\r\n");
    c.expect(b"prepend k 9 0 2\r\n__\r\n", b"STORED\r\n");
    c.expect(b"get k k2 missing\r\n", b"VALUE k 5 7\r\n__abcde\r\nVALUE k2 7 2\r\nyy\r\nEND\r\n");
    c.expect(b"append nope 0 0 1\r\nx\r\n", b"NOT_STORED\r\n");
    // cas: a stale unique is EXISTS, a missing key NOT_FOUND, the current one STORED.
    let cas = cas_of(&mut c, "k");
    c.expect(format!("cas k 1 0 1 {}\r\nz\r\n", cas + 1000).as_bytes(), b"EXISTS\r\n");
    c.expect(b"cas nope 1 0 1 1\r\nz\r\n", b"NOT_FOUND\r\n");
    c.expect(format!("cas k 1 0 1 {cas}\r\nz\r\n").as_bytes(), b"STORED\r\n");
    assert_ne!(cas_of(&mut c, "k"), cas, "every change gets a new cas");
    // incr/decr on decimal values.
    c.expect(b"set n 0 0 2\r\n10\r\n", b"STORED\r\n");
    c.expect(b"incr n 5\r\n", b"15\r\n");
    c.expect(b"decr n 100\r\n", b"0\r\n");
    c.expect(b"incr n 18446744073709551615\r\n", b"18446744073709551615\r\n");
    c.expect(b"incr n 1\r\n", b"0\r\n");
    c.expect(b"incr nope 1\r\n", b"NOT_FOUND\r\n");
    c.expect(b"incr k 1\r\n", b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n");
    // touch, delete, expiry.
    c.expect(b"touch k 100\r\n", b"TOUCHED\r\n");
    c.expect(b"touch nope 100\r\n", b"NOT_FOUND\r\n");
    c.expect(b"set gone 0 -1 1\r\nx\r\n", b"STORED\r\n");
    c.expect(b"get gone\r\n", b"END\r\n");
    c.expect(b"delete k2\r\n", b"DELETED\r\n");
    c.expect(b"delete k2\r\n", b"NOT_FOUND\r\n");
    // noreply: nothing comes back; the next reply is the next command's.
    c.expect(
        b"set q 0 0 1 noreply\r\nq\r\ndelete nope noreply\r\nget q\r\n",
        b"VALUE q 0 1\r\nq\r\nEND\r\n",
    );
    c.expect(b"version\r\n", format!("VERSION {}\r\n", ferrite_server::store::VERSION).as_bytes());
    c.expect(b"verbosity 1\r\n", b"OK\r\n");
    c.expect(b"bogus\r\n", b"ERROR\r\n");
    // flush_all: every item stored before it is gone.
    c.expect(b"flush_all\r\n", b"OK\r\n");
    c.expect(b"get k q n\r\n", b"END\r\n");
    c.expect(b"set after 0 0 1\r\nA\r\n", b"STORED\r\n");
    c.expect(b"get after\r\n", b"VALUE after 0 1\r\nA\r\nEND\r\n");
    assert!(c.line(b"stats\r\n").starts_with("STAT pid "));
    c.expect(b"quit\r\n", b"");
    let mut rest = Vec::new();
    c.0.read_to_end(&mut rest).unwrap();
    assert!(rest.ends_with(b"END\r\n") && !rest.is_empty(), "the stats, then the close");
    stop(db, server);
}

#[test]
fn pipelined_requests_split_anywhere_are_answered_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (db, server) = start(dir.path());
    let mut c = Client::connect(&server);
    let mut requests = Vec::new();
    let mut replies = Vec::new();
    for i in 0..200 {
        let value = format!("value-{i}-{}", "x".repeat(i % 37));
        requests.extend_from_slice(
            format!("set key{i} {i} 0 {}\r\n{value}\r\n", value.len()).as_bytes(),
        );
        replies.extend_from_slice(b"STORED\r\n");
        requests.extend_from_slice(format!("get key{i}\r\n").as_bytes());
        replies.extend_from_slice(
            format!("VALUE key{i} {i} {}\r\n{value}\r\nEND\r\n", value.len()).as_bytes(),
        );
    }
    // Written in pieces of odd sizes, with pauses, so requests arrive split.
    let writer = {
        let mut stream = c.0.try_clone().unwrap();
        let requests = requests.clone();
        std::thread::spawn(move || {
            for (i, piece) in requests.chunks(97).enumerate() {
                stream.write_all(piece).unwrap();
                if i % 7 == 0 {
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
        })
    };
    c.read_exactly(b"(pipeline)", &replies);
    writer.join().unwrap();
    stop(db, server);
}

#[test]
fn large_items_and_refused_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (db, server) = start(dir.path());
    let mut c = Client::connect(&server);
    for len in [4000usize, 4096, 70_000, 1 << 20] {
        let value: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
        let mut request = format!("set big{len} 3 0 {len}\r\n").into_bytes();
        request.extend_from_slice(&value);
        request.extend_from_slice(b"\r\n");
        c.expect(&request, b"STORED\r\n");
        let mut reply = format!("VALUE big{len} 3 {len}\r\n").into_bytes();
        reply.extend_from_slice(&value);
        reply.extend_from_slice(b"\r\nEND\r\n");
        c.expect(format!("get big{len}\r\n").as_bytes(), &reply);
    }
    // Past --item-max-mib: refused, its data swallowed, not read as commands.
    let len = (1 << 20) + 1;
    let mut request = format!("set huge 0 0 {len}\r\n").into_bytes();
    request.extend(std::iter::repeat_n(b'g', len));
    request.extend_from_slice(b"\r\nget huge\r\n");
    c.expect(&request, b"SERVER_ERROR object too large for cache\r\nEND\r\n");
    c.expect(b"set k 0 0 3\r\nabcd\r\n", b"CLIENT_ERROR bad data chunk\r\n");
    stop(db, server);
}

/// Items longer than a slice (`SLICE_BYTES`) go out a slice at a time: a multi-get of two of
/// them around a small one, pipelined with the next requests, answers every byte in order,
/// and a `gets` of one carries its cas; so do the hits of a multi-get past 1 MiB of reply.
#[test]
fn large_hits_stream_in_slices_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (db, server) = start(dir.path());
    let mut c = Client::connect(&server);
    let slice = ferrite_server::store::SLICE_BYTES;
    let items: Vec<(String, Vec<u8>)> = [slice + 1, 3 * slice + 17, 1 << 20]
        .iter()
        .enumerate()
        .map(|(n, &len)| (format!("big{n}"), (0..len).map(|i| (i * 7 + n) as u8).collect()))
        .collect();
    for (key, value) in &items {
        let mut request = format!("set {key} 5 0 {}\r\n", value.len()).into_bytes();
        request.extend_from_slice(value);
        request.extend_from_slice(b"\r\n");
        c.expect(&request, b"STORED\r\n");
    }
    c.expect(b"set small 1 0 2\r\nhi\r\n", b"STORED\r\n");
    let value_reply = |key: &str, value: &[u8]| {
        let mut reply = format!("VALUE {key} 5 {}\r\n", value.len()).into_bytes();
        reply.extend_from_slice(value);
        reply.extend_from_slice(b"\r\n");
        reply
    };
    let mut reply = value_reply(&items[0].0, &items[0].1);
    reply.extend_from_slice(b"VALUE small 1 2\r\nhi\r\n");
    reply.extend(value_reply(&items[1].0, &items[1].1));
    reply.extend_from_slice(b"END\r\n");
    reply.extend(value_reply(&items[2].0, &items[2].1));
    reply.extend_from_slice(b"END\r\nVALUE small 1 2\r\nhi\r\nEND\r\n");
    c.expect(b"get big0 small missing big1\r\nget big2\r\nget small\r\n", &reply);
    let cas = cas_of(&mut c, "big1");
    assert!(cas > 0);
    // A multi-get whose reply passes 1 MiB sends the rest of its hits in slices too.
    let mut request = b"get".to_vec();
    let mut reply = Vec::new();
    for n in 0..8 {
        let (key, value) = (format!("mid{n}"), vec![b'a' + n as u8; 200_000]);
        let mut set = format!("set {key} 5 0 {}\r\n", value.len()).into_bytes();
        set.extend_from_slice(&value);
        set.extend_from_slice(b"\r\n");
        c.expect(&set, b"STORED\r\n");
        request.extend_from_slice(format!(" {key}").as_bytes());
        reply.extend(value_reply(&key, &value));
    }
    request.extend_from_slice(b"\r\n");
    reply.extend_from_slice(b"END\r\n");
    c.expect(&request, &reply);
    // Replaced: the slices kept of the old value are never sent for the new one.
    let new_value: Vec<u8> = (0..items[1].1.len()).map(|i| (i * 13) as u8).collect();
    let mut request = format!("set big1 5 0 {}\r\n", new_value.len()).into_bytes();
    request.extend_from_slice(&new_value);
    request.extend_from_slice(b"\r\n");
    c.expect(&request, b"STORED\r\n");
    let mut reply = value_reply("big1", &new_value);
    reply.extend_from_slice(b"END\r\n");
    c.expect(b"get big1\r\n", &reply);
    assert!(stat(&mut c, "large_slice_shares") > 0, "the gets of big1 before it shared slices");
    drop(c);
    stop(db, server);
}

#[test]
fn meta_commands_answer_as_memcached_does() {
    let dir = tempfile::tempdir().unwrap();
    let (db, server) = start(dir.path());
    let mut c = Client::connect(&server);
    c.expect(b"mn\r\n", b"MN\r\n");
    c.expect(b"ms mk 3 F7 T0\r\nabc\r\n", b"HD\r\n");
    c.expect(b"mg mk v f s\r\n", b"VA 3 f7 s3\r\nabc\r\n");
    c.expect(b"mg mk k O123\r\n", b"HD kmk O123\r\n");
    c.expect(b"mg missing v\r\n", b"EN\r\n");
    c.expect(b"mg missing v q\r\nmn\r\n", b"MN\r\n");
    c.expect(b"ms mk 1 ME\r\nz\r\n", b"NS\r\n");
    c.expect(b"ms mk 2 MA\r\nde\r\n", b"HD\r\n");
    c.expect(b"mg mk v\r\n", b"VA 5\r\nabcde\r\n");
    c.expect(b"ms mk 1 C1\r\nz\r\n", b"EX\r\n");
    c.expect(b"md mk\r\n", b"HD\r\n");
    c.expect(b"md mk\r\n", b"NF\r\n");
    c.expect(b"ma cnt\r\n", b"NF\r\n");
    c.expect(b"ma cnt N0 J5 v\r\n", b"VA 1\r\n5\r\n");
    c.expect(b"ma cnt D10 v\r\n", b"VA 2\r\n15\r\n");
    c.expect(b"ma cnt MD D20 v\r\n", b"VA 1\r\n0\r\n");
    stop(db, server);
}

#[test]
fn a_restart_keeps_the_items() {
    let dir = tempfile::tempdir().unwrap();
    let (db, server) = start(dir.path());
    let mut c = Client::connect(&server);
    let big = "b".repeat(50_000);
    c.expect(b"set small 1 0 5\r\nhello\r\n", b"STORED\r\n");
    c.expect(format!("set big 2 0 {}\r\n{big}\r\n", big.len()).as_bytes(), b"STORED\r\n");
    c.expect(b"set gone 0 0 1\r\nx\r\n", b"STORED\r\n");
    c.expect(b"delete gone\r\n", b"DELETED\r\n");
    drop(c);
    stop(db, server);
    let (db, server) = start(dir.path());
    let mut c = Client::connect(&server);
    c.expect(b"get small gone\r\n", b"VALUE small 1 5\r\nhello\r\nEND\r\n");
    c.expect(b"get big\r\n", format!("VALUE big 2 {}\r\n{big}\r\nEND\r\n", big.len()).as_bytes());
    drop(c);
    stop(db, server);
}

/// Hostile and careless clients: a line that never ends closes its connection, a huge or
/// negative length is refused, a connection past the limit is told so and closed; none of
/// it disturbs a well-behaved client.
#[test]
fn hostile_input_is_refused_and_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), options()).unwrap());
    let config = ServerConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        max_connections: 3,
        ..ServerConfig::default()
    };
    let server = Server::start(Arc::clone(&db), &config).unwrap();
    let mut good = Client::connect(&server);
    good.expect(b"set k 0 0 1\r\nx\r\n", b"STORED\r\n");
    // 3 KiB without a newline: the connection is closed, as memcached closes it.
    let mut endless = Client::connect(&server);
    endless.0.write_all(&vec![b'a'; 3000]).unwrap();
    let mut rest = Vec::new();
    endless.0.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "{:?}", String::from_utf8_lossy(&rest));
    let mut careless = Client::connect(&server);
    careless.expect(b"set k 0 0 4294967296\r\n", b"CLIENT_ERROR bad command line format\r\n");
    careless.expect(b"set k 0 0 -1\r\n", b"CLIENT_ERROR bad command line format\r\n");
    careless.expect(
        &[b"get ", &[b'k'; 251][..], b"\r\n"].concat(),
        b"CLIENT_ERROR bad command line format\r\n",
    );
    careless.expect(b"get k\r\n", b"VALUE k 0 1\r\nx\r\nEND\r\n");
    // Three open (good, careless, this one): the fourth is told and closed.
    let _third = Client::connect(&server);
    std::thread::sleep(Duration::from_millis(100));
    let mut fourth = Client::connect(&server);
    let mut reply = Vec::new();
    fourth.0.read_to_end(&mut reply).unwrap();
    assert_eq!(reply, b"ERROR Too many open connections\r\n");
    good.expect(b"get k\r\n", b"VALUE k 0 1\r\nx\r\nEND\r\n");
    assert_eq!(
        server.counters().rejected_connections.load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    drop((good, careless, fourth));
    stop(db, server);
}

/// With an idle timeout, a connection that sends nothing for that long is closed; one that
/// keeps talking stays.
#[test]
fn idle_connections_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), options()).unwrap());
    let config = ServerConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        idle_timeout: Some(Duration::from_millis(300)),
        ..ServerConfig::default()
    };
    let server = Server::start(Arc::clone(&db), &config).unwrap();
    let mut idle = Client::connect(&server);
    let mut busy = Client::connect(&server);
    let started = std::time::Instant::now();
    for _ in 0..8 {
        std::thread::sleep(Duration::from_millis(100));
        busy.expect(
            b"version\r\n",
            format!("VERSION {}\r\n", ferrite_server::store::VERSION).as_bytes(),
        );
    }
    let mut rest = Vec::new();
    idle.0.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "closed without a word");
    assert!(started.elapsed() >= Duration::from_millis(300));
    busy.expect(b"mn\r\n", b"MN\r\n");
    drop((idle, busy));
    stop(db, server);
}

/// With an authfile, a connection must first `set` "user password": the replies are
/// memcached 1.6.18's (`memcached -Y`), checked against it by hand.
#[test]
fn an_authfile_guards_every_connection() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), options()).unwrap());
    let credentials = ferrite_server::auth::Credentials::parse(b"alice:secret\nbob:pw2\n").unwrap();
    let config = ServerConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        auth: Some(Arc::new(credentials)),
        ..ServerConfig::default()
    };
    let server = Server::start(Arc::clone(&db), &config).unwrap();
    let mut c = Client::connect(&server);
    c.expect(b"get foo\r\n", b"CLIENT_ERROR unauthenticated\r\n");
    c.expect(b"version\r\n", b"CLIENT_ERROR unauthenticated\r\n");
    c.expect(b"mn\r\n", b"CLIENT_ERROR unauthenticated\r\n");
    c.expect(b"set foo 0 0 2\r\nhi\r\n", b"CLIENT_ERROR bad authentication token format\r\n");
    c.expect(b"set x 0 0 10\r\nalice sec1\r\n", b"CLIENT_ERROR authentication failure\r\n");
    c.expect(b"get foo\r\n", b"CLIENT_ERROR unauthenticated\r\n");
    // (noreply is ignored: the attempt is answered.)
    c.expect(b"set any 0 0 12 noreply\r\nalice secret\r\n", b"STORED\r\n");
    c.expect(b"set foo 0 0 2\r\nhi\r\nget foo\r\n", b"STORED\r\nVALUE foo 0 2\r\nhi\r\nEND\r\n");
    c.expect(b"get any\r\n", b"END\r\n");
    // Each connection authenticates for itself.
    let mut other = Client::connect(&server);
    other.expect(b"get foo\r\n", b"CLIENT_ERROR unauthenticated\r\n");
    other.expect(
        b"set a 0 0 7\r\nbob pw2\r\nget foo\r\n",
        b"STORED\r\nVALUE foo 0 2\r\nhi\r\nEND\r\n",
    );
    let line = c.line(b"stats\r\n");
    assert!(line.starts_with("STAT pid "), "{line}");
    drop((c, other));
    let counters = server.counters();
    assert_eq!(counters.auth_cmds.load(std::sync::atomic::Ordering::Relaxed), 4);
    assert_eq!(counters.auth_errors.load(std::sync::atomic::Ordering::Relaxed), 2);
    stop(db, server);
}

/// A herd of 100 connections GETting one cold key makes one device read per page on the
/// key's path, not one per connection: a page being read is waited for by the others (the
/// pool's loading state), so the herd costs what one GET costs. So does a herd on a cold
/// item of 4 KiB (its value in a Value page, the rest in its leaf).
#[test]
fn a_herd_on_one_cold_key_reads_each_page_once() {
    let dir = tempfile::tempdir().unwrap();
    let (db, server) = start(dir.path());
    let mut c = Client::connect(&server);
    // Enough items for a tree of three levels; the cold key in the middle.
    let value = "v".repeat(1000);
    for chunk in (0..6000).collect::<Vec<_>>().chunks(500) {
        let mut sets = Vec::new();
        let mut replies = Vec::new();
        for i in chunk {
            sets.extend_from_slice(
                format!("set item:{i:05} 0 0 1000 noreply\r\n{value}\r\n").as_bytes(),
            );
        }
        sets.extend_from_slice(b"mn\r\n");
        replies.extend_from_slice(b"MN\r\n");
        c.expect(&sets, &replies);
    }
    c.expect(b"set item:03000x 0 0 4\r\ncold\r\n", b"STORED\r\n");
    let big = "b".repeat(4096);
    c.expect(format!("set item:03000y 0 0 4096\r\n{big}\r\n").as_bytes(), b"STORED\r\n");
    drop(c);
    stop(db, server);
    // Reopened: nothing of the items tree is in memory but what opening the server read.
    let (db, server) = start(dir.path());
    let before = db.stats().unwrap().pool.reads;
    let mut herd: Vec<Client> = (0..100).map(|_| Client::connect(&server)).collect();
    for client in &mut herd {
        client.0.write_all(b"get item:03000x\r\n").unwrap();
    }
    for client in &mut herd {
        client.read_exactly(b"get item:03000x", b"VALUE item:03000x 0 4\r\ncold\r\nEND\r\n");
    }
    let reads = db.stats().unwrap().pool.reads - before;
    // The root may be in memory already (the server read its flush mark at start).
    assert!((1..=3).contains(&reads), "{reads} page reads for a herd of 100 on one key");
    drop(herd);
    stop(db, server);
    // The 4 KiB item: its path and its Value page, each read once.
    let (db, server) = start(dir.path());
    let before = db.stats().unwrap().pool.reads;
    let mut herd: Vec<Client> = (0..100).map(|_| Client::connect(&server)).collect();
    for client in &mut herd {
        client.0.write_all(b"get item:03000y\r\n").unwrap();
    }
    let reply = format!("VALUE item:03000y 0 4096\r\n{big}\r\nEND\r\n");
    for client in &mut herd {
        client.read_exactly(b"get item:03000y", reply.as_bytes());
    }
    let reads = db.stats().unwrap().pool.reads - before;
    assert!((2..=4).contains(&reads), "{reads} page reads for a herd of 100 on a 4 KiB item");
    drop(herd);
    stop(db, server);
    // An item of 100 KB is an object, read past the pool: its one slice is read once for
    // the herd, the others share it (waiting for the read, or from the slices kept).
    let (db, server) = start(dir.path());
    let mut c = Client::connect(&server);
    let large: Vec<u8> = (0..100_000u32).map(|i| (i % 253) as u8).collect();
    let mut request = b"set item:03000z 0 0 100000\r\n".to_vec();
    request.extend_from_slice(&large);
    request.extend_from_slice(b"\r\n");
    c.expect(&request, b"STORED\r\n");
    drop(c);
    stop(db, server);
    let (db, server) = start(dir.path());
    let mut herd: Vec<Client> = (0..100).map(|_| Client::connect(&server)).collect();
    for client in &mut herd {
        client.0.write_all(b"get item:03000z\r\n").unwrap();
    }
    let mut reply = b"VALUE item:03000z 0 100000\r\n".to_vec();
    reply.extend_from_slice(&large);
    reply.extend_from_slice(b"\r\nEND\r\n");
    for client in &mut herd {
        client.read_exactly(b"get item:03000z", &reply);
    }
    let (reads, shares) =
        (stat(&mut herd[0], "large_slice_reads"), stat(&mut herd[0], "large_slice_shares"));
    assert_eq!((reads, shares), (1, 99), "slice reads and shares for a herd of 100");
    drop(herd);
    stop(db, server);
}

/// The whole reply to `stats`.
fn stats_text(client: &mut Client) -> String {
    client.0.write_all(b"stats\r\n").unwrap();
    let mut text = Vec::new();
    let mut byte = [0u8; 1];
    while !text.ends_with(b"END\r\n") {
        client.0.read_exact(&mut byte).unwrap();
        text.push(byte[0]);
    }
    String::from_utf8(text).unwrap()
}

/// A counter of `stats`.
fn stat(client: &mut Client, name: &str) -> u64 {
    let text = stats_text(client);
    let prefix = format!("STAT {name} ");
    let line = text.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("{name}"));
    line[prefix.len()..].parse().unwrap()
}

/// Pipelined small `set`s are committed in groups (in a pool of 32 MiB or more): every one
/// is answered in order, and stored, beside sets of large items and other commands.
#[test]
fn pipelined_sets_are_grouped_and_each_answered() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options { pool_bytes: 64 << 20, ..options() };
    let db = Arc::new(Db::open(dir.path(), options).unwrap());
    let config =
        ServerConfig { listen: SocketAddr::from(([127, 0, 0, 1], 0)), ..ServerConfig::default() };
    let server = Server::start(Arc::clone(&db), &config).unwrap();
    let mut c = Client::connect(&server);
    let big = "B".repeat(6000);
    let mut request = Vec::new();
    let mut reply = Vec::new();
    for i in 0..300 {
        let value = if i % 97 == 5 { big.clone() } else { format!("value-{i}") };
        let noreply = if i % 10 == 3 { " noreply" } else { "" };
        request.extend_from_slice(
            format!("set k{i} {i} 0 {}{noreply}\r\n{value}\r\n", value.len()).as_bytes(),
        );
        if noreply.is_empty() {
            reply.extend_from_slice(b"STORED\r\n");
        }
        if i % 50 == 49 {
            request.extend_from_slice(format!("get k{}\r\n", i - 1).as_bytes());
            let v = format!("value-{}", i - 1);
            reply.extend_from_slice(
                format!("VALUE k{} {} {}\r\n{v}\r\nEND\r\n", i - 1, i - 1, v.len()).as_bytes(),
            );
        }
    }
    c.expect(&request, &reply);
    for i in [0usize, 5, 102, 199, 299] {
        let value = if i % 97 == 5 { big.clone() } else { format!("value-{i}") };
        c.expect(
            format!("get k{i}\r\n").as_bytes(),
            format!("VALUE k{i} {i} {}\r\n{value}\r\nEND\r\n", value.len()).as_bytes(),
        );
    }
    assert_eq!(server.counters().cmd_set.load(std::sync::atomic::Ordering::Relaxed), 300);
    drop(c);
    stop(db, server);
}

/// `backup NAME` copies the database while another client keeps storing: the copy opens,
/// checks clean, and holds every item acknowledged before the command was sent. Names that
/// could reach outside the backup directory are refused by the decoder; a name taken, and a
/// server without a backup directory, are refused with a reason.
#[test]
fn backup_copies_online_while_clients_store() {
    let dir = tempfile::tempdir().unwrap();
    let (data, backups) = (dir.path().join("data"), dir.path().join("backups"));
    std::fs::create_dir(&backups).unwrap();
    let db = Arc::new(Db::open(&data, options()).unwrap());
    let config = ServerConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        backup_dir: Some(backups.clone()),
        ..ServerConfig::default()
    };
    let server = Server::start(Arc::clone(&db), &config).unwrap();
    let mut client = Client::connect(&server);
    for i in 0..300 {
        client.expect(format!("set before-{i} 0 0 6\r\nvalue!\r\n").as_bytes(), b"STORED\r\n");
    }
    // A writer that stores as fast as it is answered, counting what was acknowledged.
    let acknowledged = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let stop_writing = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let mut writer = Client::connect(&server);
        let (acknowledged, stop_writing) = (Arc::clone(&acknowledged), Arc::clone(&stop_writing));
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop_writing.load(std::sync::atomic::Ordering::Acquire) {
                let value = "x".repeat(2000 + (i % 7) as usize * 1000);
                let request = format!("set during-{i} 0 0 {}\r\n{value}\r\n", value.len());
                writer.expect(request.as_bytes(), b"STORED\r\n");
                i += 1;
                acknowledged.store(i, std::sync::atomic::Ordering::Release);
            }
            i
        })
    };
    while acknowledged.load(std::sync::atomic::Ordering::Acquire) < 50 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let before_backup = acknowledged.load(std::sync::atomic::Ordering::Acquire);
    assert_eq!(client.line(b"backup first\r\n"), "OK\r\n");
    stop_writing.store(true, std::sync::atomic::Ordering::Release);
    let written = writer.join().unwrap();
    assert!(written >= before_backup);

    for bad in
        ["backup\r\n", "backup ../up\r\n", "backup .hidden\r\n", "backup a/b\r\n", "backup a b\r\n"]
    {
        assert_eq!(
            client.line(bad.as_bytes()),
            "CLIENT_ERROR bad command line format\r\n",
            "{bad}"
        );
    }
    let taken = client.line(b"backup first\r\n");
    assert!(taken.starts_with("SERVER_ERROR ") && taken.contains("exists already"), "{taken}");
    assert_eq!(stat(&mut client, "backups"), 1);
    assert_eq!(stat(&mut client, "backup_failures"), 1);
    assert!(!dir.path().join("up").exists());
    stop(db, server);

    // The copy: recovers, checks clean, holds what was acknowledged before the command.
    let copy = Db::open(backups.join("first"), Options { workers: 0, ..options() }).unwrap();
    let report = copy.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.all_faults());
    let items = copy.tree(ferrite_server::server::ITEMS_TREE).unwrap();
    for i in 0..300 {
        assert!(items.get(format!("before-{i}")).unwrap().is_some(), "before-{i}");
    }
    for i in 0..before_backup {
        assert!(items.get(format!("during-{i}")).unwrap().is_some(), "during-{i}");
    }
    copy.close().unwrap();

    // A server without a backup directory says how to get one.
    let other = tempfile::tempdir().unwrap();
    let (db, server) = start(other.path());
    let mut client = Client::connect(&server);
    let off = client.line(b"backup first\r\n");
    assert!(
        off.starts_with("SERVER_ERROR backups are off") && off.contains("--backup-dir"),
        "{off}"
    );
    stop(db, server);
}

/// With a second cache tier under a pool smaller than the items, `get`s of items evicted
/// from the pool are served from the tier (`stats` counts them), every value exactly as
/// stored, also after some were replaced; a server without a tier shows no tier lines.
#[test]
fn a_tier_serves_evicted_items_and_stats_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let tier = ferrite::TierOptions {
        admission: ferrite::TierAdmission::All,
        ..ferrite::TierOptions::new(dir.path().join("tier"), 32 << 20)
    };
    let options = Options { tier: Some(tier), ..options() };
    let db = Arc::new(Db::open(dir.path().join("data"), options).unwrap());
    let config =
        ServerConfig { listen: SocketAddr::from(([127, 0, 0, 1], 0)), ..ServerConfig::default() };
    let server = Server::start(Arc::clone(&db), &config).unwrap();
    let mut client = Client::connect(&server);
    // 12 MiB of 3 KiB items through an 8 MiB pool.
    let value = |i: usize, round: usize| format!("{i:05}-{round}-").repeat(300);
    for i in 0..4_000 {
        let v = value(i, 0);
        client.expect(format!("set k{i} 0 0 {}\r\n{v}\r\n", v.len()).as_bytes(), b"STORED\r\n");
    }
    for round in 0..2 {
        for i in (0..4_000).step_by(7) {
            if round == 1 && i % 2 == 0 {
                let v = value(i, 1);
                let set = format!("set k{i} 0 0 {}\r\n{v}\r\n", v.len());
                client.expect(set.as_bytes(), b"STORED\r\n");
            }
        }
        for i in (0..4_000).step_by(7) {
            let v = value(i, usize::from(round == 1 && i % 2 == 0));
            let reply = format!("VALUE k{i} 0 {}\r\n{v}\r\nEND\r\n", v.len());
            client.expect(format!("get k{i}\r\n").as_bytes(), reply.as_bytes());
        }
    }
    assert!(stat(&mut client, "tier_hits") > 0);
    assert!(stat(&mut client, "tier_inserts") > 0);
    assert!(stat(&mut client, "tier_invalidations") > 0);
    stop(db, server);

    let other = tempfile::tempdir().unwrap();
    let (db, server) = start(other.path());
    let mut client = Client::connect(&server);
    assert!(!stats_text(&mut client).contains("tier_"));
    stop(db, server);
}
