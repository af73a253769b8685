//! Eviction and the expiry sweep end to end: a cache-mode server on a small disk budget
//! takes four times the budget in items without refusing one, keeps the keys that are
//! read and the ones written last; a store-mode server refuses writes once full and loses
//! none it took; expired items are removed by the sweep without being read, even when the
//! hand passed them alive before they expired.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrite::{Db, Durability, Options};
use ferrite_server::{Server, ServerConfig};

/// 4 MiB: about 3,000 items of 1,000 bytes.
const BUDGET: u64 = 4 << 20;

fn start(dir: &std::path::Path, evict: bool) -> (Arc<Db>, Server) {
    let options = Options {
        workers: 2,
        pool_bytes: 2 << 20,
        max_size_bytes: BUDGET,
        // (Every write waits for no log sync: the test is about space.)
        durability: Durability::None,
        create_if_missing: true,
        ..Options::default()
    };
    let db = Arc::new(Db::open(dir, options).unwrap());
    let config = ServerConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        evict,
        ..ServerConfig::default()
    };
    let server = Server::start(Arc::clone(&db), &config).unwrap();
    (db, server)
}

fn stop(db: Arc<Db>, server: Server) {
    server.shut_down();
    Arc::into_inner(db).expect("no task holds the database").close().unwrap();
}

struct Client {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Client {
    fn connect(server: &Server) -> Client {
        let stream = TcpStream::connect(server.local_addr()).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Client { reader: BufReader::new(stream.try_clone().unwrap()), writer: stream }
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        assert!(line.ends_with("\r\n"), "a whole reply line: {line:?}");
        line.truncate(line.len() - 2);
        line
    }

    /// Sets `keys` (1,000 bytes each, pipelined); returns each reply line.
    fn set_all(&mut self, keys: &[String]) -> Vec<String> {
        self.set_sized(keys, 1000)
    }

    /// Sets `keys` (`len` bytes each, pipelined); returns each reply line.
    fn set_sized(&mut self, keys: &[String], len: usize) -> Vec<String> {
        let mut request = Vec::new();
        for key in keys {
            request.extend_from_slice(format!("set {key} 0 0 {len}\r\n").as_bytes());
            request.extend_from_slice(&sized_value(key, len));
            request.extend_from_slice(b"\r\n");
        }
        self.writer.write_all(&request).unwrap();
        keys.iter().map(|_| self.line()).collect()
    }

    /// Which of `keys` are present (one multi-get), each value checked.
    fn present(&mut self, keys: &[String]) -> HashSet<String> {
        self.writer.write_all(format!("get {}\r\n", keys.join(" ")).as_bytes()).unwrap();
        let mut found = HashSet::new();
        loop {
            let line = self.line();
            if line == "END" {
                return found;
            }
            let fields: Vec<&str> = line.split(' ').collect();
            assert_eq!((fields[0], fields.len()), ("VALUE", 4), "{line}");
            let mut data = vec![0u8; 1002];
            std::io::Read::read_exact(&mut self.reader, &mut data).unwrap();
            assert_eq!(&data[..1000], &value_of(fields[1])[..], "the value of {}", fields[1]);
            found.insert(fields[1].to_owned());
        }
    }

    fn stat(&mut self, name: &str) -> u64 {
        self.writer.write_all(b"stats\r\n").unwrap();
        let mut value = None;
        loop {
            let line = self.line();
            if line == "END" {
                return value.unwrap_or_else(|| panic!("no stat {name}"));
            }
            let fields: Vec<&str> = line.split(' ').collect();
            if fields[1] == name {
                value = Some(fields[2].parse().unwrap());
            }
        }
    }
}

fn value_of(key: &str) -> Vec<u8> {
    sized_value(key, 1000)
}

fn sized_value(key: &str, len: usize) -> Vec<u8> {
    let seed = key.bytes().fold(7u8, |a, b| a.wrapping_mul(31).wrapping_add(b));
    (0..len).map(|i| seed.wrapping_add(i as u8)).collect()
}

fn keys(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}:{i:06}")).collect()
}

#[test]
fn a_cache_keeps_its_budget_and_its_hot_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (db, server) = start(dir.path(), true);
    let mut client = Client::connect(&server);
    let hot = keys("hot", 0..100);
    assert!(client.set_all(&hot).iter().all(|r| r == "STORED"));
    // Four budgets' worth, in batches, the hot keys read after each.
    let total = 4 * BUDGET as usize / 1000;
    for start in (0..total).step_by(100) {
        let batch = keys("item", start..start + 100);
        let replies = client.set_all(&batch);
        assert!(replies.iter().all(|r| r == "STORED"), "a write refused: {replies:?}");
        let present = client.present(&hot);
        assert_eq!(present.len(), hot.len(), "hot keys evicted after item {start}");
    }
    let usage = db.space_usage();
    assert!(usage.used_pages() <= usage.max_pages, "{usage:?}");
    let evictions = client.stat("evictions");
    assert!(evictions as usize > total / 2, "{evictions} evictions of {total} items");
    // The last written are referenced still; most of the first are gone.
    assert_eq!(client.present(&keys("item", total - 200..total)).len(), 200);
    let old = client.present(&keys("item", 0..1000)).len();
    assert!(old < 500, "{old} of the first 1,000 items kept");
    drop(client);
    stop(db, server);
}

#[test]
fn a_full_store_refuses_writes_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (db, server) = start(dir.path(), false);
    let mut client = Client::connect(&server);
    let mut stored = Vec::new();
    let mut refused = 0;
    for start in (0..2 * BUDGET as usize / 1000).step_by(100) {
        let batch = keys("item", start..start + 100);
        for (key, reply) in batch.iter().zip(client.set_all(&batch)) {
            match reply.as_str() {
                "STORED" => stored.push(key.clone()),
                "SERVER_ERROR out of memory storing object" => refused += 1,
                other => panic!("{key}: {other}"),
            }
        }
    }
    assert!(refused > 0 && stored.len() > 1000, "{} stored, {refused} refused", stored.len());
    for chunk in stored.chunks(100) {
        assert_eq!(client.present(chunk).len(), chunk.len(), "a stored item is gone");
    }
    assert_eq!(client.stat("evictions"), 0);
    drop(client);
    stop(db, server);
}

#[test]
fn the_sweep_removes_expired_items() {
    let dir = tempfile::tempdir().unwrap();
    let (db, server) = start(dir.path(), true);
    let mut client = Client::connect(&server);
    let mut request = Vec::new();
    for key in keys("a-expiring", 0..300) {
        request.extend_from_slice(format!("set {key} 0 2 3\r\nabc\r\n").as_bytes());
    }
    let written = Instant::now();
    client.writer.write_all(&request).unwrap();
    for _ in 0..300 {
        assert_eq!(client.line(), "STORED");
    }
    // Writes nudge the sweeper. Before the items expire (at least a second after they were
    // written) the hand passes them alive, several laps over: it must come back for them.
    let write_others = |client: &mut Client, next: &mut usize| {
        let mut request = Vec::new();
        for key in keys("b-other", *next..*next + 64) {
            request.extend_from_slice(format!("set {key} 0 0 3\r\nxyz\r\n").as_bytes());
        }
        client.writer.write_all(&request).unwrap();
        for _ in 0..64 {
            assert_eq!(client.line(), "STORED");
        }
        *next += 64;
    };
    let mut next = 0;
    while next < 64 * 100 && written.elapsed() < Duration::from_millis(800) {
        write_others(&mut client, &mut next);
        // (A round trip: the sweeper runs between the nudges.)
        client.stat("reclaimed");
    }
    std::thread::sleep(Duration::from_millis(2100).saturating_sub(written.elapsed()));
    let started = Instant::now();
    while client.stat("reclaimed") < 300 {
        assert!(started.elapsed() < Duration::from_secs(60), "the sweep stalled");
        assert_eq!(client.stat("evictions"), 0, "the store filled before the sweep came");
        write_others(&mut client, &mut next);
    }
    assert_eq!(client.stat("evictions"), 0, "nothing live was evicted");
    assert_eq!(client.stat("get_expired"), 0, "the sweep read no item to find it expired");
    client.writer.write_all(b"get a-expiring:000000 b-other:000000\r\n").unwrap();
    assert_eq!(client.line(), "VALUE b-other:000000 0 3");
    assert_eq!(client.line(), "xyz");
    assert_eq!(client.line(), "END");
    drop(client);
    stop(db, server);
}

#[test]
fn large_items_are_evicted_too() {
    // Items past the in-leaf limit are objects: their data pages are freed apart from the
    // tree's.
    let dir = tempfile::tempdir().unwrap();
    let (db, server) = start(dir.path(), true);
    let mut client = Client::connect(&server);
    let len = 10_000;
    let total = 3 * BUDGET as usize / len;
    for start in (0..total).step_by(20) {
        let replies = client.set_sized(&keys("big", start..start + 20), len);
        assert!(replies.iter().all(|r| r == "STORED"), "a write refused: {replies:?}");
    }
    assert!(client.stat("evictions") as usize > total / 2);
    let last = keys("big", total - 20..total);
    client.writer.write_all(format!("get {}\r\n", last.join(" ")).as_bytes()).unwrap();
    for key in &last {
        assert_eq!(client.line(), format!("VALUE {key} 0 {len}"));
        let mut data = vec![0u8; len + 2];
        std::io::Read::read_exact(&mut client.reader, &mut data).unwrap();
        assert_eq!(&data[..len], &sized_value(key, len)[..]);
    }
    assert_eq!(client.line(), "END");
    drop(client);
    stop(db, server);
}
