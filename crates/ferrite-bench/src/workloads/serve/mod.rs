//! `bench serve`: a memcached load generator against `ferrite serve` or memcached with
//! extstore.
//!
//! 1. The store: with `--server ADDR:PORT`, whatever listens there. Otherwise the run
//!    starts it. Ferrite runs in this process (`ferrite_server::Server` on a database in
//!    `--db`/ferrite, one worker per core, a pool of `--memory-mib` less a quarter, at most 64 MiB,
//!    for the rest). memcached runs as a child: `memcached -m M` with extstore in a file
//!    under `--db` as large as the data plus half, its worker threads one per core, and
//!    `-I` large enough for the values. Both run in a memory cgroup of `--memory-mib` plus
//!    64 MiB and 4 MiB per connection (`generator_allowance`) where the machine allows:
//!    extstore reads through the page cache, which otherwise holds all the data.
//! 2. Load: `--keys` items of `--value-size` bytes, set in order from `--connections`
//!    connections, 64 requests pipelined per connection; not measured.
//! 3. Measure: each connection does one request at a time, a GET or a SET as `--mix`
//!    says, of a key drawn uniformly or from a scrambled zipfian (θ 0.99, or `theta`). Closed loop, or
//!    with `--rate` open loop: Poisson arrivals at rate/C per connection, latency counted
//!    from the intended send time (a connection that falls behind sends at once, and its
//!    lateness counts). A warm-up of min(S/5, 2 s) first.
//!
//! Every value is checked: its first 16 bytes name the key and the version written, and the
//! rest is derived from them; a GET of other bytes ends the run (a miss is counted, not an
//! error: a cache may drop items). `hit_ratio` is hits over GETs.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::BenchError;
use crate::gen::rng::{mix64, Rng};
use crate::gen::zipf::Zipf;
use crate::measure::cpu::CpuTime;
use crate::measure::diskstats::{Disk, DiskCounters};
use crate::measure::memcap::{evict_from_page_cache, MemoryCap};
use crate::measure::phase::{MEASURE, STOP, WARMUP};
use crate::report::ResultLine;
use crate::runner::{new_histogram, record, Hdr};
use crate::stores::ferrite::tier_counters_of;
use crate::stores::TierCounters;
use crate::workloads::run::TierConfig;

mod ring;

/// The stores `bench serve` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServeStore {
    Ferrite,
    Memcached,
}

impl ServeStore {
    pub fn name(self) -> &'static str {
        match self {
            ServeStore::Ferrite => "ferrite",
            ServeStore::Memcached => "memcached",
        }
    }

    pub fn parse(text: &str) -> Result<ServeStore, String> {
        match text {
            "ferrite" => Ok(ServeStore::Ferrite),
            "memcached" => Ok(ServeStore::Memcached),
            _ => Err(format!("unknown store {text:?} (ferrite, memcached)")),
        }
    }
}

/// Everything a `bench serve` run is told.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeConfig {
    pub store: ServeStore,
    /// A server already running; `None`: the run starts the store.
    pub server: Option<SocketAddr>,
    pub dir: PathBuf,
    pub memory_mib: u64,
    /// The store's disk: Ferrite's page file budget (`max_size_bytes`; past it, a cache
    /// evicts), memcached's extstore file. `None`: unbounded for Ferrite, 1.5x the data
    /// for memcached.
    pub disk_budget_mib: Option<u64>,
    pub keys: u64,
    pub value_size: usize,
    /// Percent of operations that are GETs (the rest SETs).
    pub get_percent: u32,
    pub zipfian: bool,
    /// The zipfian constant of zipfian keys (0.99 by default).
    pub theta: f64,
    /// Operations per second offered in all; `None`: closed loop.
    pub rate: Option<f64>,
    pub connections: usize,
    pub seconds: f64,
    pub seed: u64,
    pub json: Option<PathBuf>,
    /// Ferrite's durability (memcached has none: a restart loses everything).
    pub durability: ferrite::Durability,
    /// How the measured part's connections are driven.
    pub client: Client,
    /// Keys per GET request (`get k1 k2 …`): 1 is a plain GET.
    pub multiget: usize,
    /// The measured part is herds instead of the mix: each round, every connection GETs one
    /// key, the same for all and not read before in the run, at once (GETs only).
    pub herd: bool,
    /// Ferrite: a second cache tier under the pool of the server the run starts.
    pub tier: Option<TierConfig>,
}

/// The load generator's client for the measured part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// A thread per connection, blocking sends and receives (the default).
    Threads,
    /// One thread and one io_uring for every connection (`ring.rs`).
    Ring,
}

impl Client {
    pub fn parse(text: &str) -> Result<Client, String> {
        match text {
            "threads" => Ok(Client::Threads),
            "ring" => Ok(Client::Ring),
            _ => Err(format!("unknown client {text:?} (threads, ring)")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Client::Threads => "threads",
            Client::Ring => "ring",
        }
    }
}

impl ServeConfig {
    pub fn new(store: ServeStore) -> Self {
        ServeConfig {
            store,
            server: None,
            dir: PathBuf::from(format!("ferrite-data/bench-serve-{}", store.name())),
            memory_mib: 256,
            disk_budget_mib: None,
            keys: 1_000_000,
            value_size: 1024,
            get_percent: 90,
            zipfian: false,
            rate: None,
            connections: 32,
            seconds: 20.0,
            seed: 1,
            json: None,
            durability: ferrite::Durability::Sync,
            client: Client::Threads,
            multiget: 1,
            herd: false,
            tier: None,
            theta: 0.99,
        }
    }

    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |reason: String| Err(BenchError::Config(reason));
        if self.keys == 0 || self.keys > 1 << 32 {
            return bad(format!("--keys {} is out of range (1 to 2^32)", self.keys));
        }
        if self.value_size < HEADER_BYTES || self.value_size > 1 << 30 {
            return bad(format!(
                "--value-size {} is out of range ({HEADER_BYTES} to 1 GiB: a value starts with \
                 its {HEADER_BYTES}-byte check header)",
                self.value_size
            ));
        }
        if self.get_percent > 100 {
            return bad(format!("GET share {}% is over 100%", self.get_percent));
        }
        if self.connections == 0 || self.connections > 4096 {
            return bad(format!("--connections {} is out of range (1 to 4096)", self.connections));
        }
        if !(self.seconds > 0.0 && self.seconds <= 1e6) {
            return bad(format!("{} seconds is out of range", self.seconds));
        }
        if self.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
            return bad("--rate must be a positive number of operations per second".into());
        }
        if self.memory_mib < 16 {
            return bad(format!("--memory-mib {} is below 16", self.memory_mib));
        }
        if self.multiget == 0 || self.multiget > MULTIGET_MAX {
            return bad(format!(
                "--multiget {} is out of range (1 to {MULTIGET_MAX})",
                self.multiget
            ));
        }
        if self.multiget as u64 > self.keys {
            // (A request's keys are distinct: there would be too few to draw.)
            return bad(format!(
                "--multiget {} asks for more keys than --keys {}",
                self.multiget, self.keys
            ));
        }
        if self.client == Client::Ring && (self.multiget > 1 || self.herd) {
            return bad("--client ring sends single GETs in the mix: drop --multiget and \
                        --herd, or use --client threads"
                .into());
        }
        if self.herd && (self.rate.is_some() || self.get_percent != 100 || self.multiget > 1) {
            return bad("--herd runs rounds of single GETs, all connections at once: it takes \
                        no --rate, no SETs (--mix 100:0) and no --multiget"
                .into());
        }
        Ok(())
    }

    /// `90:10`.
    pub fn mix(&self) -> String {
        format!("{}:{}", self.get_percent, 100 - self.get_percent)
    }

    fn warmup(&self) -> Duration {
        Duration::from_secs_f64((self.seconds / 5.0).min(2.0))
    }
}

/// `--mix GET:SET` (percentages adding to 100): the GET share.
pub fn parse_mix(text: &str) -> Result<u32, String> {
    let (get, set) = text.split_once(':').ok_or(format!("{text:?} is not GET:SET (say 90:10)"))?;
    let (get, set): (u32, u32) = match (get.parse(), set.parse()) {
        (Ok(get), Ok(set)) => (get, set),
        _ => return Err(format!("{text:?} is not GET:SET (say 90:10)")),
    };
    if get + set != 100 {
        return Err(format!("{text:?}: the shares add to {}, not 100", get + set));
    }
    Ok(get)
}

/// Bytes of values all the load's connections send in their pipelined batches at once (each
/// batch at most 64 SETs, and at least one).
const LOAD_BYTES: usize = 8 << 20;

/// Most keys in one GET request.
pub const MULTIGET_MAX: usize = 100;

/// Bytes of a value's check header: `k` and the key number, `v` and the version, in hex.
const HEADER_BYTES: usize = 16;

/// The value of key `key` at version `version`, `size` bytes.
fn value_of(key: u64, version: u32, size: usize) -> Vec<u8> {
    let mut value = format!("k{:07x}v{:07x}", key & 0xFFF_FFFF, version & 0xFFF_FFFF).into_bytes();
    let mut state = mix64(key ^ (u64::from(version) << 32));
    while value.len() < size {
        state = mix64(state);
        value.extend_from_slice(&state.to_le_bytes());
    }
    value.truncate(size);
    value
}

/// Whether `value` is what `value_of` wrote for `key` (any version).
fn check_value(key: u64, value: &[u8], size: usize) -> Result<(), String> {
    let header = std::str::from_utf8(value.get(..HEADER_BYTES).unwrap_or(b"")).unwrap_or("");
    let (k, v) = header.strip_prefix('k').and_then(|h| h.split_once('v')).unwrap_or(("", ""));
    let (Ok(k), Ok(v)) = (u64::from_str_radix(k, 16), u32::from_str_radix(v, 16)) else {
        return Err(format!("key {key}: a value without its header ({} bytes)", value.len()));
    };
    if k != key & 0xFFF_FFFF {
        return Err(format!("key {key}: the value of key {k}"));
    }
    if value != value_of(key, v, size) {
        return Err(format!("key {key}: version {v}'s bytes differ ({} bytes)", value.len()));
    }
    Ok(())
}

fn key_name(key: u64) -> String {
    format!("key:{key:010}")
}

fn io_error(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> BenchError {
    let context = context.into();
    move |source| BenchError::Io { context, source }
}

/// A memcached connection that pipelines requests and reads replies.
struct Conn {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
    line: String,
}

impl Conn {
    fn connect(addr: SocketAddr) -> Result<Conn, BenchError> {
        let stream = TcpStream::connect(addr).map_err(io_error(format!("connecting to {addr}")))?;
        let _ = stream.set_nodelay(true);
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(io_error("setting a read timeout"))?;
        let reader = BufReader::with_capacity(
            256 << 10,
            stream.try_clone().map_err(io_error("cloning a socket"))?,
        );
        Ok(Conn { writer: stream, reader, line: String::new() })
    }

    fn queue_set(&self, out: &mut Vec<u8>, key: u64, value: &[u8]) {
        out.extend_from_slice(format!("set {} 0 0 {}\r\n", key_name(key), value.len()).as_bytes());
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), BenchError> {
        self.writer.write_all(bytes).map_err(io_error("sending requests"))
    }

    fn read_line(&mut self) -> Result<&str, BenchError> {
        self.line.clear();
        let n = self.reader.read_line(&mut self.line).map_err(io_error("reading a reply"))?;
        if n == 0 {
            return Err(BenchError::Store("the server closed the connection".into()));
        }
        Ok(self.line.trim_end())
    }

    /// The reply to a SET: `true` if stored, `false` if the server is out of memory for now
    /// (memcached's extstore answers so while its flash writes lag), else an error.
    fn expect_stored(&mut self) -> Result<bool, BenchError> {
        match self.read_line()? {
            "STORED" => Ok(true),
            line if line.starts_with("SERVER_ERROR out of memory") => Ok(false),
            other => Err(BenchError::Store(format!("a SET was answered {other:?}").into())),
        }
    }
}

/// What a GET found.
enum Got {
    Hit(Vec<u8>),
    Miss,
}

impl Conn {
    fn get(&mut self, key: u64) -> Result<Got, BenchError> {
        self.send(format!("get {}\r\n", key_name(key)).as_bytes())?;
        let line = self.read_line()?.to_owned();
        if line == "END" {
            return Ok(Got::Miss);
        }
        let len: usize = line
            .strip_prefix("VALUE ")
            .and_then(|rest| rest.split(' ').nth(2))
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| BenchError::Store(format!("a GET was answered {line:?}").into()))?;
        let mut value = vec![0u8; len + 2];
        self.reader.read_exact(&mut value).map_err(io_error("reading a value"))?;
        value.truncate(len);
        match self.read_line()? {
            "END" => Ok(Got::Hit(value)),
            other => Err(BenchError::Store(format!("a value was followed by {other:?}").into())),
        }
    }
}

impl Conn {
    /// A GET of every key of `keys` in one request: the hits, each with its key, in the
    /// order the server sent them (memcached's: the request's, misses left out).
    fn get_many(&mut self, keys: &[u64]) -> Result<Vec<(u64, Vec<u8>)>, BenchError> {
        let mut request = String::from("get");
        for &key in keys {
            request.push(' ');
            request.push_str(&key_name(key));
        }
        request.push_str("\r\n");
        self.send(request.as_bytes())?;
        let mut hits = Vec::new();
        loop {
            let line = self.read_line()?.to_owned();
            if line == "END" {
                return Ok(hits);
            }
            let bad = || BenchError::Store(format!("a multi-get was answered {line:?}").into());
            let mut fields = line.strip_prefix("VALUE ").ok_or_else(bad)?.split(' ');
            let key: u64 = fields
                .next()
                .and_then(|name| name.strip_prefix("key:"))
                .and_then(|n| n.parse().ok())
                .filter(|key| keys.contains(key))
                .ok_or_else(bad)?;
            let len: usize = fields.nth(1).and_then(|n| n.parse().ok()).ok_or_else(bad)?;
            let mut value = vec![0u8; len + 2];
            self.reader.read_exact(&mut value).map_err(io_error("reading a value"))?;
            value.truncate(len);
            hits.push((key, value));
        }
    }
}

/// The store under test while the run lasts.
enum Target {
    Ferrite { db: Arc<ferrite::Db>, server: ferrite_server::Server },
    Memcached { child: Child },
    External,
}

impl Target {
    /// The server's process id, when it is a child of this one.
    fn child_pid(&self) -> Option<u32> {
        match self {
            Target::Memcached { child } => Some(child.id()),
            _ => None,
        }
    }

    /// Its second cache tier's counters so far (Ferrite's, with a tier).
    fn tier_counters(&self) -> Option<TierCounters> {
        match self {
            Target::Ferrite { db, .. } => tier_counters_of(db),
            _ => None,
        }
    }

    fn stop(self) -> Result<(), BenchError> {
        match self {
            Target::Ferrite { db, server } => {
                server.shut_down();
                let db = Arc::into_inner(db).expect("the server's tasks let go of the database");
                db.close().map_err(BenchError::Engine)
            }
            Target::Memcached { mut child } => {
                let _ = child.kill();
                let _ = child.wait();
                Ok(())
            }
            Target::External => Ok(()),
        }
    }
}

fn free_port() -> Result<u16, BenchError> {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").map_err(io_error("finding a port"))?;
    Ok(listener.local_addr().map_err(io_error("finding a port"))?.port())
}

/// Starts the store of `config` (not `--server`): its address, the running store, and
/// the options it runs with, in words.
fn start(config: &ServeConfig) -> Result<(SocketAddr, Target, String), BenchError> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let memory = config.memory_mib << 20;
    match config.store {
        ServeStore::Ferrite => {
            let options = ferrite::Options {
                create_if_missing: true,
                pool_bytes: memory - (memory / 4).min(64 << 20),
                durability: config.durability,
                max_size_bytes: config
                    .disk_budget_mib
                    .map_or(ferrite::Options::default().max_size_bytes, |mib| mib << 20),
                tier: config.tier.as_ref().map(TierConfig::options),
                ..ferrite::Options::default()
            };
            let description = format!(
                "ferrite serve in this process: pool_bytes={}, workers={}, durability={:?}, \
                 direct_io={}, max_size_bytes={} (cache mode: evicts past it){}",
                options.pool_bytes,
                options.workers,
                options.durability,
                options.direct_io,
                options.max_size_bytes,
                config.tier.as_ref().map_or(String::new(), |t| format!(
                    ", tier {}",
                    t.describe(crate::stores::StoreKind::Ferrite)
                ))
            );
            let db = Arc::new(ferrite::Db::open(config.dir.join("ferrite"), options)?);
            let server_config = ferrite_server::ServerConfig {
                listen: SocketAddr::from(([127, 0, 0, 1], 0)),
                item_max_bytes: config.value_size.max(1 << 20),
                // As `ferrite serve` sets it.
                slice_cache_bytes: (memory / 32) as usize,
                ..ferrite_server::ServerConfig::default()
            };
            let server = ferrite_server::Server::start(Arc::clone(&db), &server_config)
                .map_err(io_error("starting ferrite serve"))?;
            Ok((server.local_addr(), Target::Ferrite { db, server }, description))
        }
        ServeStore::Memcached => {
            let port = free_port()?;
            let data = config.keys * config.value_size as u64;
            let ext_mib = config
                .disk_budget_mib
                .unwrap_or_else(|| (data + data / 2).div_ceil(1 << 20).max(256));
            let ext = config.dir.join("extstore");
            let item_max_mib = (config.value_size as u64 + 1024).div_ceil(1 << 20).max(1);
            let args = vec![
                "-l".to_owned(),
                "127.0.0.1".to_owned(),
                "-p".to_owned(),
                port.to_string(),
                "-U".to_owned(),
                "0".to_owned(),
                "-m".to_owned(),
                config.memory_mib.to_string(),
                "-t".to_owned(),
                cores.to_string(),
                "-c".to_owned(),
                "8192".to_owned(),
                "-I".to_owned(),
                format!("{item_max_mib}m"),
                "-o".to_owned(),
                format!("ext_path={}:{ext_mib}m,ext_threads={cores}", ext.display()),
            ];
            let mut args = args;
            // (memcached refuses to run as root unless told which user to be.)
            // SAFETY: geteuid only reads this process's effective user id.
            #[allow(unsafe_code)]
            if unsafe { libc::geteuid() } == 0 {
                args.extend(["-u".to_owned(), "root".to_owned()]);
            }
            let description = format!(
                "memcached {}; loaded paced by its evictions, with `slabs automove 2` while \
                 loading",
                args.join(" ")
            );
            let child = Command::new("memcached")
                .args(&args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(io_error("starting memcached (apt-get install memcached)"))?;
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            let deadline = Instant::now() + Duration::from_secs(10);
            while TcpStream::connect(addr).is_err() {
                if Instant::now() > deadline {
                    return Err(BenchError::Store("memcached did not start listening".into()));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok((addr, Target::Memcached { child }, description))
        }
    }
}

/// The server's `stats` (or `stats SUB`): each name with its value.
fn server_stats(addr: SocketAddr, sub: &str) -> Result<Vec<(String, String)>, BenchError> {
    let mut conn = Conn::connect(addr)?;
    let command = if sub.is_empty() { "stats\r\n".to_owned() } else { format!("stats {sub}\r\n") };
    conn.send(command.as_bytes())?;
    let mut stats = Vec::new();
    loop {
        let line = conn.read_line()?;
        if line == "END" {
            return Ok(stats);
        }
        let mut words = line.splitn(3, ' ');
        match (words.next(), words.next(), words.next()) {
            (Some("STAT"), Some(name), Some(value)) => {
                stats.push((name.to_owned(), value.to_owned()));
            }
            _ => return Err(BenchError::Store(format!("`stats` was answered {line:?}").into())),
        }
    }
}

/// One numeric stat of `stats`, if the server keeps it.
fn stat(stats: &[(String, String)], name: &str) -> Option<u64> {
    stats.iter().find(|(n, _)| n == name).and_then(|(_, v)| v.parse().ok())
}

/// A request whose answer must be `OK` (memcached's `slabs automove N`).
fn command_ok(addr: SocketAddr, command: &str) -> Result<(), BenchError> {
    let mut conn = Conn::connect(addr)?;
    conn.send(format!("{command}\r\n").as_bytes())?;
    match conn.read_line()? {
        "OK" => Ok(()),
        other => Err(BenchError::Store(format!("`{command}` was answered {other:?}").into())),
    }
}

/// What the load did, and what the server held after it.
#[derive(Debug, Clone, Default)]
pub struct LoadFacts {
    pub seconds: f64,
    /// Items the server evicted while loading (its `evictions`), if it counts them.
    pub evictions: Option<u64>,
    /// Items the server held once loaded (`curr_items`), if it counts them.
    pub items: Option<u64>,
    /// memcached: items whose values were on flash once loaded (`extstore_objects_used`).
    pub flash_items: Option<u64>,
    /// memcached: the mean rate the paced load ran at, SETs/s.
    pub paced_rate: Option<f64>,
    /// Seconds waited after the load for the disk to go quiet (`settle`).
    pub settle_seconds: f64,
}

/// The disk is quiet when it writes less than this in a second.
const QUIET_BYTES_PER_S: u64 = 4 << 20;

/// Waits until the disk under `dir` writes less than `QUIET_BYTES_PER_S` in a second, then
/// until a sync of its file system is quick (60 s at most in all), so that what a load left
/// behind (write-back, checkpoints, extstore's flushes, a virtual disk's host cache) is not
/// measured as if the measured requests caused it. Its seconds.
fn settle(dir: &Path) -> f64 {
    let start = Instant::now();
    let Some(disk) = Disk::of(dir) else { return 0.0 };
    let mut before = disk.counters();
    while start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_secs(1));
        let now = disk.counters();
        match (now, before) {
            (Some(now_c), Some(before_c))
                if now_c.since(before_c).written_bytes >= QUIET_BYTES_PER_S => {}
            _ => break,
        }
        before = now;
    }
    // The device too: on a virtual disk the host may still hold much of what the load wrote,
    // and the first cache flushes after it (every durable commit sends one) then wait for
    // all of it, for tenths of a second each. Flush until a flush is quick.
    while start.elapsed() < Duration::from_secs(60) && sync_file_system(dir) > QUICK_FLUSH {}
    start.elapsed().as_secs_f64()
}

/// A device cache flush is quick when it takes less than this.
const QUICK_FLUSH: Duration = Duration::from_millis(20);

/// Syncs the file system holding `dir` (`syncfs`: its dirty data, then a device cache flush);
/// how long that took.
fn sync_file_system(dir: &Path) -> Duration {
    let start = Instant::now();
    if let Ok(file) = std::fs::File::open(dir) {
        use std::os::fd::AsRawFd;
        // SAFETY: syncfs takes an open descriptor, which `file` holds until after the call.
        #[allow(unsafe_code)]
        unsafe {
            libc::syncfs(file.as_raw_fd());
        }
    }
    start.elapsed()
}

/// The paced load's rates, SETs/s: where it starts, its floor and its ceiling; for values
/// past 4 KiB the start and the floor are these many bytes a second instead
/// (`Pacer::for_values`): 10,000 SETs/s of 100 KB would be 1 GB/s, which memcached's
/// extstore cannot flush, so it evicted 77% of 13,000 such items while loading.
const PACE_START: f64 = 50_000.0;
const PACE_FLOOR: f64 = 10_000.0;
const PACE_CEILING: f64 = 1_000_000.0;
const PACE_START_BYTES: f64 = PACE_START * 4096.0;
const PACE_FLOOR_BYTES: f64 = PACE_FLOOR * 4096.0;

/// Spaces the load's batches at a rate the watcher changes.
struct Pacer {
    /// The least rate, SETs/s.
    floor: f64,
    /// When the next batch may go, ns from `start`.
    next_ns: std::sync::Mutex<u64>,
    start: Instant,
    rate_bits: std::sync::atomic::AtomicU64,
}

impl Pacer {
    /// A pacer for values of `value_size` bytes.
    fn for_values(value_size: usize) -> Pacer {
        let size = value_size.max(1) as f64;
        let floor = PACE_FLOOR.min(PACE_FLOOR_BYTES / size).max(1.0);
        Pacer::new(PACE_START.min(PACE_START_BYTES / size).max(floor), floor)
    }

    fn new(rate: f64, floor: f64) -> Pacer {
        Pacer {
            floor,
            next_ns: std::sync::Mutex::new(0),
            start: Instant::now(),
            rate_bits: std::sync::atomic::AtomicU64::new(rate.to_bits()),
        }
    }

    fn rate(&self) -> f64 {
        f64::from_bits(self.rate_bits.load(Ordering::Relaxed))
    }

    fn set_rate(&self, rate: f64) {
        self.rate_bits.store(rate.clamp(self.floor, PACE_CEILING).to_bits(), Ordering::Relaxed);
    }

    /// Waits for the turn of a batch of `items` SETs.
    fn wait(&self, items: u64) {
        let gap_ns = (items as f64 * 1e9 / self.rate()) as u64;
        let due = {
            let now = self.start.elapsed().as_nanos() as u64;
            let mut next = self.next_ns.lock().expect("no pacer holder panics");
            // (A load that fell behind does not burst to catch up.)
            let due = (*next).max(now);
            *next = due + gap_ns;
            due
        };
        let now = self.start.elapsed().as_nanos() as u64;
        if due > now {
            std::thread::sleep(Duration::from_nanos(due - now));
        }
    }
}

/// Sets every key once, from `connections` connections, 64 pipelined per round trip.
///
/// memcached is loaded paced. Its extstore flushes values to the file in the background, and
/// an item flushed keeps a header in RAM, in a smaller slab class than the value's. That
/// class grows only as fast as memcached's page mover moves pages to it, so a load at full
/// speed (240 k SETs/s here) evicts about nine items in ten. The load therefore runs with
/// `slabs automove 2` (the mover's aggressive mode, which memcached's protocol notes advise
/// only for access patterns well understood, as a bulk load is) and `slabs automove 1`
/// again after; and a watcher reads `evictions` five times a second, cutting the rate by a
/// third while memcached evicts and raising it by a tenth while it does not.
fn load(addr: SocketAddr, config: &ServeConfig) -> Result<LoadFacts, BenchError> {
    let paced = config.store == ServeStore::Memcached;
    let evicted_before = stat(&server_stats(addr, "")?, "evictions");
    if paced {
        command_ok(addr, "slabs automove 2")?;
    }
    let pacer = Pacer::for_values(config.value_size);
    let loaded = std::sync::atomic::AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let start = Instant::now();
    let per = config.keys.div_ceil(config.connections as u64);
    let outcome = std::thread::scope(|scope| {
        let watcher = paced.then(|| {
            let (pacer, loaded, done) = (&pacer, &loaded, &done);
            scope.spawn(move || -> Result<(), BenchError> {
                let (mut evicted, mut sent) = (evicted_before.unwrap_or(0), 0);
                while !done.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(200));
                    let now = stat(&server_stats(addr, "")?, "evictions").unwrap_or(0);
                    let now_sent = loaded.load(Ordering::Relaxed);
                    let (new_evicted, new_sent) = (now - evicted, now_sent - sent);
                    (evicted, sent) = (now, now_sent);
                    if new_evicted * 100 > new_sent {
                        pacer.set_rate(pacer.rate() / 1.5);
                    } else if new_evicted == 0 {
                        pacer.set_rate(pacer.rate() * 1.1);
                    }
                }
                Ok(())
            })
        });
        let handles: Vec<_> = (0..config.connections as u64)
            .map(|c| {
                let (pacer, loaded) = (&pacer, &loaded);
                scope.spawn(move || -> Result<(), BenchError> {
                    let mut conn = Conn::connect(addr)?;
                    let (first, end) = (c * per, ((c + 1) * per).min(config.keys));
                    let mut key = first;
                    let mut out = Vec::new();
                    // Keys a server out of memory for now refused: set again after a pause
                    // (a bulk loader backs off so; for a minute at most).
                    let mut refused: Vec<u64> = Vec::new();
                    let deadline = Instant::now() + Duration::from_secs(60);
                    while key < end || !refused.is_empty() {
                        out.clear();
                        let retry = std::mem::take(&mut refused);
                        if !retry.is_empty() {
                            if Instant::now() > deadline {
                                return Err(BenchError::Store(
                                    "the server kept refusing SETs (out of memory) for a minute"
                                        .into(),
                                ));
                            }
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        // At most 64 SETs a batch, and 8 MiB of values over all the
                        // connections: the load generator shares memcached's memory cgroup
                        // (100 connections sending 64 items of 100 KB each were killed in it).
                        let share = LOAD_BYTES / config.connections;
                        let most = (share / config.value_size).clamp(1, 64) as u64;
                        let batch = (end - key).min(most);
                        let keys: Vec<u64> = retry.into_iter().chain(key..key + batch).collect();
                        if paced {
                            pacer.wait(keys.len() as u64);
                        }
                        for &k in &keys {
                            conn.queue_set(&mut out, k, &value_of(k, 0, config.value_size));
                        }
                        conn.send(&out)?;
                        for &k in &keys {
                            if !conn.expect_stored()? {
                                refused.push(k);
                            }
                        }
                        loaded.fetch_add(keys.len() as u64, Ordering::Relaxed);
                        key += batch;
                    }
                    Ok(())
                })
            })
            .collect();
        let loaders =
            handles.into_iter().try_for_each(|h| h.join().expect("a load thread panicked"));
        done.store(true, Ordering::Release);
        let watched = watcher.map_or(Ok(()), |w| w.join().expect("the load watcher panicked"));
        loaders.and(watched)
    });
    let seconds = start.elapsed().as_secs_f64();
    if paced {
        command_ok(addr, "slabs automove 1")?;
    }
    outcome?;
    let after = if paced { settled_stats(addr)? } else { server_stats(addr, "")? };
    let evictions = stat(&after, "evictions")
        .map(|after_n| after_n.saturating_sub(evicted_before.unwrap_or(0)));
    Ok(LoadFacts {
        seconds,
        evictions,
        items: stat(&after, "curr_items"),
        flash_items: stat(&after, "extstore_objects_used"),
        paced_rate: paced.then(|| config.keys as f64 / seconds),
        settle_seconds: 0.0,
    })
}

/// memcached's `stats` once its extstore flusher has settled: no new object written to the
/// file in half a second (30 s at most).
fn settled_stats(addr: SocketAddr) -> Result<Vec<(String, String)>, BenchError> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut stats = server_stats(addr, "")?;
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = server_stats(addr, "")?;
        let written = |s: &[(String, String)]| stat(s, "extstore_objects_written");
        if written(&now) == written(&stats) || Instant::now() > deadline {
            return Ok(now);
        }
        stats = now;
    }
}

/// What one connection counted while measuring.
struct Counts {
    /// Requests answered: GETs (a multi-get is one) and SETs.
    requests: u64,
    /// Keys asked for by GETs.
    gets: u64,
    hits: u64,
    sets: u64,
    /// SETs the server refused for lack of memory.
    set_errors: u64,
    latency_ns: Hdr,
    /// This thread's CPU while measuring.
    cpu: CpuTime,
}

impl Counts {
    fn new() -> Counts {
        Counts {
            requests: 0,
            gets: 0,
            hits: 0,
            sets: 0,
            set_errors: 0,
            latency_ns: new_histogram(),
            cpu: CpuTime::default(),
        }
    }
}

/// The report of a run.
#[derive(Debug)]
pub struct ServeReport {
    pub config: ServeConfig,
    pub store_description: String,
    pub ops: u64,
    pub gets: u64,
    pub hits: u64,
    pub sets: u64,
    /// Measured SETs refused for lack of memory (counted in `sets` and `ops` too).
    pub set_errors: u64,
    pub seconds: f64,
    pub load: LoadFacts,
    /// memcached: GET hits read from its extstore file while measuring (`get_extstore`).
    pub flash_hits: Option<u64>,
    /// Ferrite with `--tier`: its second cache tier while measuring.
    pub tier: Option<TierCounters>,
    /// What the disk under `--db` did while measuring, if `/proc/diskstats` lists it.
    pub disk_io: Option<DiskCounters>,
    pub latency_ns: Hdr,
    /// CPU of the load generator's connection threads while measuring.
    pub cpu: CpuTime,
    /// CPU of the server while measuring: memcached's process, or this process less the
    /// connection threads when Ferrite runs in it; `None` for a server started elsewhere.
    pub server_cpu: Option<CpuTime>,
    pub capped: String,
}

impl ServeReport {
    pub fn ops_per_s(&self) -> f64 {
        self.ops as f64 / self.seconds
    }

    /// Rounds of a herd run: each connection GETs once a round.
    pub fn herd_rounds(&self) -> u64 {
        self.gets / self.config.connections.max(1) as u64
    }

    pub fn hit_ratio(&self) -> f64 {
        if self.gets == 0 {
            return 1.0;
        }
        self.hits as f64 / self.gets as f64
    }

    fn us(&self, q: f64) -> f64 {
        self.latency_ns.value_at_quantile(q) as f64 / 1000.0
    }

    pub fn result_line(&self) -> ResultLine {
        let c = &self.config;
        let mut line = ResultLine::new()
            .word("store", c.store.name())
            .word("workload", "serve")
            .word("mix", &c.mix())
            .real("ops_per_s", self.ops_per_s(), 0)
            .real("p50_us", self.us(0.5), 1)
            .real("p99_us", self.us(0.99), 1)
            .real("hit_ratio", self.hit_ratio(), 4)
            .real("p999_us", self.us(0.999), 1)
            .real("max_us", self.latency_ns.max() as f64 / 1000.0, 1)
            .int("keys", c.keys)
            .int("value_size", c.value_size as u64)
            .word("distribution", if c.zipfian { "zipfian" } else { "uniform" })
            .int("connections", c.connections as u64)
            .int("memory_mib", c.memory_mib)
            // (memcached keeps nothing across a restart: none.)
            .word(
                "durability",
                match (c.store, c.server) {
                    (ServeStore::Ferrite, None) => durability_name(c.durability),
                    (ServeStore::Memcached, None) => "none",
                    (_, Some(_)) => "unknown",
                },
            );
        line = match c.rate {
            Some(rate) => line.real("rate", rate, 0),
            None => line.word("rate", "closed"),
        };
        line = line
            .int("ops", self.ops)
            .int("gets", self.gets)
            .int("sets", self.sets)
            .int("set_errors", self.set_errors)
            .real("seconds", self.seconds, 2)
            .real("load_s", self.load.seconds, 2)
            .real("client_cpu_us_per_op", self.cpu.total_s() * 1e6 / self.ops.max(1) as f64, 2)
            .word(
                "disk_budget_mib",
                &c.disk_budget_mib.map_or_else(|| "default".to_owned(), |mib| mib.to_string()),
            );
        // What the server says of itself, where it keeps the count.
        for (name, value) in [
            ("load_evictions", self.load.evictions),
            ("items_after_load", self.load.items),
            ("flash_items", self.load.flash_items),
            ("flash_hits", self.flash_hits),
        ] {
            if let Some(value) = value {
                line = line.int(name, value);
            }
        }
        if let Some(rate) = self.load.paced_rate {
            line = line.real("load_rate", rate, 0);
        }
        line = line.real("settle_s", self.load.settle_seconds, 1).word("client", c.client.name());
        if c.multiget > 1 {
            line = line.int("multiget", c.multiget as u64);
        }
        if c.herd {
            line = line.int("herd_rounds", self.herd_rounds());
            if let Some(io) = &self.disk_io {
                let per = io.reads as f64 / self.herd_rounds().max(1) as f64;
                line = line.real("device_reads_per_herd", per, 2);
            }
        }
        if let Some(server) = &self.server_cpu {
            let ops = self.ops.max(1) as f64;
            line = line.real("server_cpu_us_per_op", server.total_s() * 1e6 / ops, 2).real(
                "ops_per_server_core_s",
                ops / server.total_s().max(1e-9),
                0,
            );
        }
        if let Some(io) = &self.disk_io {
            // (Per GET only where there were GETs: a run of SETs alone has no such figure.)
            if self.gets > 0 {
                line = line.real("device_reads_per_get", io.reads as f64 / self.gets as f64, 3);
            }
            line = line.real("device_kib_per_read", io.read_kib_per_read(), 1).real(
                "device_reads_per_op",
                io.reads as f64 / self.ops.max(1) as f64,
                3,
            );
        }
        // The tier's fields, as every workload gives them (zeros without one).
        let tier = self.tier.unwrap_or_default();
        tier.window_fields(tier.use_fields(line)).real("theta", c.theta, 2)
    }

    /// The server's own account of the load and of flash, in words (none if it keeps none).
    pub fn server_facts(&self) -> Vec<String> {
        let mut facts = Vec::new();
        if let Some(items) = self.load.items {
            facts.push(format!("held {items} items after the load"));
        }
        if let Some(evictions) = self.load.evictions {
            facts.push(format!("evicted {evictions} while loading"));
        }
        if let Some(flash) = self.load.flash_items {
            facts.push(format!("had {flash} items on flash"));
        }
        if let Some(rate) = self.load.paced_rate {
            facts.push(format!("was loaded paced, at {rate:.0} SETs/s on average"));
        }
        if let Some(flash_hits) = self.flash_hits {
            facts.push(format!("read {flash_hits} of the measured hits from flash"));
        }
        facts
    }

    pub fn summary(&self) -> String {
        let c = &self.config;
        let mut text = format!(
            "  bench serve   {} GET:SET on {}, {} keys of {} B ({:.1} MiB of values), {} \
             connections, {}, {}\n  store         {}{}\n  throughput    {:.0} ops/s over \
             {:.2} s ({} GETs, {} hits: hit ratio {:.4}; {} SETs, {} refused)\n  latency       p50 {:.1} \
             µs, p99 {:.1} µs, p99.9 {:.1} µs, max {:.1} µs{}{}{}{}\n",
            c.mix(),
            c.store.name(),
            c.keys,
            c.value_size,
            (c.keys * c.value_size as u64) as f64 / (1u64 << 20) as f64,
            c.connections,
            if c.zipfian { "zipfian keys" } else { "uniform keys" },
            c.rate.map_or("closed loop".to_owned(), |r| format!("open loop at {r:.0} ops/s")),
            self.store_description,
            self.capped,
            self.ops_per_s(),
            self.seconds,
            self.gets,
            self.hits,
            self.hit_ratio(),
            self.sets,
            self.set_errors,
            self.us(0.5),
            self.us(0.99),
            self.us(0.999),
            self.latency_ns.max() as f64 / 1000.0,
            if c.rate.is_some() { " (from each request's intended send time)" } else { "" },
            {
                let ops = self.ops.max(1) as f64;
                let client = self.cpu.total_s() * 1e6 / ops;
                match &self.server_cpu {
                    Some(server) => format!(
                        "\n  cpu           client {client:.1} µs per op; server {:.1} µs per op, \
                         {:.0} ops per server core-second",
                        server.total_s() * 1e6 / ops,
                        ops / server.total_s().max(1e-9)
                    ),
                    None => format!("\n  cpu           client {client:.1} µs per op"),
                }
            },
            match &self.disk_io {
                Some(io) => format!(
                    "\n  device        {}, {:.1} KiB per read; measured after {:.1} s for the \
                     disk to go quiet after the load",
                    match self.gets {
                        0 => format!(
                            "{:.3} reads per operation (no GETs)",
                            io.reads as f64 / self.ops.max(1) as f64
                        ),
                        gets => format!("{:.3} reads per GET", io.reads as f64 / gets as f64),
                    },
                    io.read_kib_per_read(),
                    self.load.settle_seconds
                ),
                None => String::new(),
            },
            match self.server_facts() {
                facts if facts.is_empty() => String::new(),
                facts => format!("\n  server        {}", facts.join(", ")),
            },
        );
        if let Some(tier) = &self.tier {
            text.push_str(&format!("  tier use      {}\n", tier.describe()));
        }
        if c.multiget > 1 {
            text.push_str(&format!(
                "  multi-get     {} keys per GET request (ops count requests, GETs count keys)\n",
                c.multiget
            ));
        }
        if c.herd {
            let rounds = self.herd_rounds();
            text.push_str(&format!(
                "  herds         {rounds} rounds, each {} connections GETting one key not read \
                 before, at once{}\n",
                c.connections,
                match &self.disk_io {
                    Some(io) => format!(
                        ": {:.2} device reads per round",
                        io.reads as f64 / rounds.max(1) as f64
                    ),
                    None => String::new(),
                }
            ));
        }
        text
    }
}

/// What this process needs of its own in memcached's memory cgroup, beyond memcached's
/// `--memory-mib`: a base, and for each connection's load-generator thread the heap the
/// allocator (mimalloc) commits for a thread that allocates, a few MiB each. A flat 64 MiB
/// was too little for 32 threads: the cgroup held 78 MiB of anonymous memory, memcached
/// 5 MiB of it, when the kernel killed the run (2026-12-07).
fn generator_allowance(connections: usize) -> u64 {
    (64 << 20) + connections as u64 * (4 << 20)
}

/// `sync`, `periodic` or `none`.
pub fn durability_name(durability: ferrite::Durability) -> &'static str {
    match durability {
        ferrite::Durability::Sync => "sync",
        ferrite::Durability::Periodic(_) => "periodic",
        ferrite::Durability::None => "none",
    }
}

/// Runs `bench serve` as `config` says.
pub fn run(config: &ServeConfig, show_progress: bool) -> Result<ServeReport, BenchError> {
    let mut reports = run_rates(config, &[config.rate], show_progress, &mut |_| {})?;
    Ok(reports.pop().expect("one report per rate"))
}

/// [`run`] at each of `rates` in turn (`None`: closed loop) on one store, loaded once: a
/// report per rate, each also handed to `done` as it finishes.
pub fn run_rates(
    config: &ServeConfig,
    rates: &[Option<f64>],
    show_progress: bool,
    done: &mut dyn FnMut(&ServeReport),
) -> Result<Vec<ServeReport>, BenchError> {
    config.validate()?;
    assert!(!rates.is_empty(), "at least one rate");
    let _ = show_progress;
    if config.server.is_none() {
        crate::workloads::run::remove_bench_dir(&config.dir)?;
        std::fs::create_dir_all(&config.dir)
            .map_err(io_error(format!("creating {}", config.dir.display())))?;
        std::fs::write(
            config.dir.join(crate::workloads::run::MARKER_FILE),
            "made by `ferrite bench`, which removes it\n",
        )
        .map_err(io_error("marking the data directory"))?;
    }
    // extstore reads through the page cache: cap it (memcached inherits the cgroup).
    let (cap, capped) = match (config.server, config.store, cfg!(test)) {
        (None, ServeStore::Memcached, false) => {
            match MemoryCap::enter(
                (config.memory_mib << 20) + generator_allowance(config.connections),
            ) {
                Ok(cap) => {
                    let note = format!(
                        " [memory capped: a cgroup of {} MiB for memcached and this load \
                         generator]",
                        cap.limit_bytes >> 20
                    );
                    (Some(cap), note)
                }
                Err(reason) => (None, format!(" [page cache NOT capped ({reason})]")),
            }
        }
        _ => (None, String::new()),
    };
    let (addr, target, description) = match config.server {
        Some(addr) => (addr, Target::External, format!("a server at {addr}, started elsewhere")),
        None => start(config)?,
    };
    let outcome = (|| {
        let mut load = load(addr, config)?;
        load.settle_seconds = settle(&config.dir);
        let disk = Disk::of(&config.dir);
        if config.store == ServeStore::Memcached {
            evict_from_page_cache(&config.dir);
        }
        let mut reports = Vec::new();
        for &rate in rates {
            let config = ServeConfig { rate, ..config.clone() };
            let flash_read = |stats: &[(String, String)]| stat(stats, "get_extstore");
            let flash_before = flash_read(&server_stats(addr, "")?);
            let disk_before = disk.as_ref().and_then(Disk::counters);
            let tier_before = target.tier_counters();
            let child_before = target.child_pid().and_then(CpuTime::of_process);
            let (counts, seconds, process_cpu) = measure(addr, &config)?;
            let cpu = counts.iter().fold(CpuTime::default(), |sum, c| sum.plus(c.cpu));
            let server_cpu = match &target {
                Target::Ferrite { .. } => Some(process_cpu.since(cpu)),
                Target::Memcached { child } => CpuTime::of_process(child.id())
                    .zip(child_before)
                    .map(|(after, before)| after.since(before)),
                Target::External => None,
            };
            let disk_io = disk
                .as_ref()
                .and_then(Disk::counters)
                .zip(disk_before)
                .map(|(after, before)| after.since(before));
            let flash_hits = flash_read(&server_stats(addr, "")?)
                .zip(flash_before)
                .map(|(after, before)| after.saturating_sub(before));
            let tier = target.tier_counters().zip(tier_before).map(|(a, b)| a.since(b));
            let measured = Measured { counts, seconds, cpu, server_cpu, flash_hits, tier, disk_io };
            let report = report_of(&config, &description, &capped, &load, measured)?;
            done(&report);
            reports.push(report);
        }
        Ok::<_, BenchError>(reports)
    })();
    let stopped = target.stop();
    drop(cap);
    let reports = outcome?;
    stopped?;
    if config.server.is_none() {
        crate::workloads::run::remove_bench_dir(&config.dir)?;
    }
    Ok(reports)
}

/// What one measured part counted.
struct Measured {
    counts: Vec<Counts>,
    seconds: f64,
    cpu: CpuTime,
    server_cpu: Option<CpuTime>,
    flash_hits: Option<u64>,
    tier: Option<TierCounters>,
    disk_io: Option<DiskCounters>,
}

/// The report of one measured part, its JSON line appended where `config.json` says.
fn report_of(
    config: &ServeConfig,
    description: &str,
    capped: &str,
    load: &LoadFacts,
    measured: Measured,
) -> Result<ServeReport, BenchError> {
    let Measured { counts, seconds, cpu, server_cpu, flash_hits, tier, disk_io } = measured;
    let mut latency_ns = new_histogram();
    let (mut requests, mut gets, mut hits, mut sets, mut set_errors) = (0, 0, 0, 0, 0);
    for c in counts {
        requests += c.requests;
        gets += c.gets;
        hits += c.hits;
        sets += c.sets;
        set_errors += c.set_errors;
        latency_ns.add(&c.latency_ns).expect("histograms of one shape");
    }
    let report = ServeReport {
        config: config.clone(),
        store_description: description.to_owned(),
        ops: requests,
        gets,
        hits,
        sets,
        set_errors,
        seconds,
        load: load.clone(),
        flash_hits,
        tier,
        disk_io,
        latency_ns,
        cpu,
        server_cpu,
        capped: capped.to_owned(),
    };
    if let Some(path) = &config.json {
        let json = serde_json::json!({
            "result": report.result_line().to_string(),
            "store_config": report.store_description,
        });
        crate::workloads::run::append_json(path, &json.to_string())?;
    }
    Ok(report)
}

/// The measured part: warm-up, then `config.seconds`; the counts of each thread of the
/// client (a thread per connection, or with `Client::Ring` one driver thread for all,
/// `ring.rs`), the seconds measured, and this process's CPU over them.
fn measure(
    addr: SocketAddr,
    config: &ServeConfig,
) -> Result<(Vec<Counts>, f64, CpuTime), BenchError> {
    if config.herd {
        return herds(addr, config);
    }
    let phase = AtomicU8::new(WARMUP);
    let failed = AtomicBool::new(false);
    let zipf = config.zipfian.then(|| Zipf::scrambled(config.keys, config.theta));
    std::thread::scope(|scope| {
        let (phase_ref, failed_ref, zipf) = (&phase, &failed, zipf.as_ref());
        // A client thread's outcome, a failure also told to the timeline below.
        let noted = move |outcome: Result<Counts, BenchError>| {
            if outcome.is_err() {
                failed_ref.store(true, Ordering::Release);
            }
            outcome
        };
        let handles: Vec<_> = match config.client {
            Client::Ring => {
                vec![scope.spawn(move || noted(ring::drive(addr, config, phase_ref, zipf)))]
            }
            Client::Threads => (0..config.connections as u64)
                .map(|c| scope.spawn(move || noted(connection(addr, config, c, phase_ref, zipf))))
                .collect(),
        };
        let warmup_end = Instant::now() + config.warmup();
        while Instant::now() < warmup_end && !failed.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let cpu_before = CpuTime::now();
        let start = Instant::now();
        phase.store(MEASURE, Ordering::Release);
        let end = start + Duration::from_secs_f64(config.seconds);
        while Instant::now() < end && !failed.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(10));
        }
        phase.store(STOP, Ordering::Release);
        let seconds = start.elapsed().as_secs_f64();
        let cpu = CpuTime::now().since(cpu_before);
        let counts = handles
            .into_iter()
            .map(|h| h.join().expect("a client thread panicked"))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((counts, seconds, cpu))
    })
}

/// The measured part as herds: rounds until `config.seconds` are up, in each of which every
/// connection GETs the same key at once (released together by a barrier), a key not read
/// before in the run: cold, unless the store keeps what it loaded last. Latency runs from
/// the round's release to each reply.
fn herds(
    addr: SocketAddr,
    config: &ServeConfig,
) -> Result<(Vec<Counts>, f64, CpuTime), BenchError> {
    let mut conns =
        (0..config.connections).map(|_| Conn::connect(addr)).collect::<Result<Vec<_>, _>>()?;
    let barrier = std::sync::Barrier::new(config.connections + 1);
    let key = std::sync::atomic::AtomicU64::new(0);
    let (stop, failed) = (AtomicBool::new(false), AtomicBool::new(false));
    std::thread::scope(|scope| {
        let (barrier, key, stop, failed) = (&barrier, &key, &stop, &failed);
        let handles: Vec<_> = conns
            .iter_mut()
            .map(|conn| {
                scope.spawn(move || {
                    let mut counts = Counts::new();
                    let mut outcome = Ok(());
                    let cpu_from = CpuTime::this_thread();
                    loop {
                        barrier.wait();
                        if stop.load(Ordering::Acquire) {
                            break;
                        }
                        // A failed connection still meets every barrier, so no round hangs.
                        if outcome.is_ok() {
                            let key = key.load(Ordering::Acquire);
                            let started = Instant::now();
                            outcome = conn.get(key).and_then(|got| {
                                record(&mut counts.latency_ns, started.elapsed().as_nanos() as u64);
                                counts.requests += 1;
                                counts.gets += 1;
                                if let Got::Hit(value) = got {
                                    counts.hits += 1;
                                    check_value(key, &value, config.value_size).map_err(|e| {
                                        BenchError::Content(format!("GET {}: {e}", key_name(key)))
                                    })?;
                                }
                                Ok(())
                            });
                            if outcome.is_err() {
                                failed.store(true, Ordering::Release);
                            }
                        }
                        barrier.wait();
                    }
                    counts.cpu = CpuTime::this_thread().since(cpu_from);
                    outcome.map(|()| counts)
                })
            })
            .collect();
        let mut rng = Rng::stream(config.seed, u64::MAX);
        let mut used = std::collections::HashSet::new();
        let cpu_before = CpuTime::now();
        let start = Instant::now();
        let end = start + Duration::from_secs_f64(config.seconds);
        while Instant::now() < end && !failed.load(Ordering::Acquire) {
            // A key no round asked for yet (all asked: any).
            let mut next = rng.below(config.keys);
            for _ in 0..64 {
                if used.insert(next) {
                    break;
                }
                next = rng.below(config.keys);
            }
            key.store(next, Ordering::Release);
            barrier.wait(); // go
            barrier.wait(); // every reply in
        }
        stop.store(true, Ordering::Release);
        barrier.wait();
        let seconds = start.elapsed().as_secs_f64();
        let cpu = CpuTime::now().since(cpu_before);
        let counts = handles
            .into_iter()
            .map(|h| h.join().expect("a herd thread panicked"))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((counts, seconds, cpu))
    })
}

/// One connection's requests until the phase says stop.
fn connection(
    addr: SocketAddr,
    config: &ServeConfig,
    index: u64,
    phase: &AtomicU8,
    zipf: Option<&Zipf>,
) -> Result<Counts, BenchError> {
    let mut conn = Conn::connect(addr)?;
    let mut rng = Rng::stream(config.seed, index);
    let mut counts = Counts::new();
    let mut cpu_from: Option<CpuTime> = None;
    let per_connection = config.rate.map(|rate| rate / config.connections as f64);
    let mut next_send = Instant::now();
    let mut version = (index as u32) << 20;
    let mut out = Vec::new();
    loop {
        let now_phase = phase.load(Ordering::Acquire);
        if now_phase == STOP {
            if let Some(from) = cpu_from {
                counts.cpu = CpuTime::this_thread().since(from);
            }
            return Ok(counts);
        }
        if now_phase == MEASURE && cpu_from.is_none() {
            cpu_from = Some(CpuTime::this_thread());
        }
        let intended = match per_connection {
            Some(rate) => {
                // Exponential gaps: a Poisson process at `rate`.
                let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                next_send += Duration::from_secs_f64(-(1.0 - u).ln() / rate);
                let now = Instant::now();
                if next_send > now {
                    std::thread::sleep(next_send - now);
                }
                next_send
            }
            None => Instant::now(),
        };
        let key = match zipf {
            Some(zipf) => zipf.sample(&mut rng),
            None => rng.below(config.keys),
        };
        let is_get = rng.below(100) < u64::from(config.get_percent);
        let measuring = now_phase == MEASURE;
        if is_get && config.multiget > 1 {
            let mut keys = vec![key];
            while keys.len() < config.multiget {
                let more = match zipf {
                    Some(zipf) => zipf.sample(&mut rng),
                    None => rng.below(config.keys),
                };
                if !keys.contains(&more) {
                    keys.push(more);
                }
            }
            let hits = conn.get_many(&keys)?;
            for (key, value) in &hits {
                check_value(*key, value, config.value_size)
                    .map_err(|e| BenchError::Content(format!("GET {}: {e}", key_name(*key))))?;
            }
            counts.hits += if measuring { hits.len() as u64 } else { 0 };
            counts.gets += if measuring { keys.len() as u64 } else { 0 };
            counts.requests += u64::from(measuring);
        } else if is_get {
            counts.requests += u64::from(measuring);
            match conn.get(key)? {
                Got::Hit(value) => {
                    check_value(key, &value, config.value_size)
                        .map_err(|e| BenchError::Content(format!("GET {}: {e}", key_name(key))))?;
                    counts.hits += u64::from(measuring);
                }
                Got::Miss => {}
            }
            counts.gets += u64::from(measuring);
        } else {
            version = version.wrapping_add(1);
            out.clear();
            conn.queue_set(&mut out, key, &value_of(key, version, config.value_size));
            conn.send(&out)?;
            let stored = conn.expect_stored()?;
            counts.sets += u64::from(measuring);
            counts.requests += u64::from(measuring);
            counts.set_errors += u64::from(measuring && !stored);
        }
        if measuring {
            record(&mut counts.latency_ns, intended.elapsed().as_nanos() as u64);
        }
    }
}

/// Whether memcached can be started here.
pub fn memcached_installed() -> bool {
    Command::new("memcached").arg("-V").output().is_ok_and(|o| o.status.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_check_themselves_and_mixes_parse() {
        let v = value_of(42, 7, 100);
        assert_eq!(v.len(), 100);
        assert!(check_value(42, &v, 100).is_ok());
        assert!(check_value(43, &v, 100).unwrap_err().contains("the value of key 42"));
        let mut bad = v.clone();
        bad[60] ^= 1;
        assert!(check_value(42, &bad, 100).unwrap_err().contains("bytes differ"));
        assert!(check_value(42, b"short", 100).unwrap_err().contains("without its header"));
        assert_eq!(parse_mix("90:10"), Ok(90));
        assert!(parse_mix("90:20").unwrap_err().contains("add to 110"));
        assert!(parse_mix("x").is_err());
    }

    fn tiny(store: ServeStore, dir: &Path) -> ServeConfig {
        ServeConfig {
            dir: dir.join("serve"),
            memory_mib: 16,
            keys: 2000,
            value_size: 600,
            connections: 4,
            seconds: 0.3,
            ..ServeConfig::new(store)
        }
    }

    /// `--tier` puts a second cache tier under the pool of the server the run starts (here a
    /// block medium, read and written through the workers' rings): items whose pages left
    /// the pool are read back from it, every value still checked, and the result line
    /// carries the tier's fields (with `theta`).
    #[test]
    fn ferrite_serves_through_a_tier() {
        let tmp = tempfile::tempdir().unwrap();
        let tier = TierConfig {
            path: tmp.path().join("tier"),
            mib: 48,
            latency_ns: 0,
            admission: ferrite::TierAdmission::All,
            filter: ferrite::TierFilter::Frequency,
            // Through the server's workers' rings.
            medium: ferrite::TierMedium::Block,
            rocksdb: Default::default(),
        };
        // About 20 MiB of items through a pool of 12 MiB.
        let config = ServeConfig {
            keys: 30_000,
            get_percent: 100,
            zipfian: true,
            theta: 0.8,
            seconds: 1.0,
            tier: Some(tier),
            durability: ferrite::Durability::None,
            ..tiny(ServeStore::Ferrite, tmp.path())
        };
        let report = run(&config, false).unwrap();
        assert_eq!(report.hit_ratio(), 1.0, "{}", report.summary());
        let tier = report.tier.expect("the tier's counters");
        assert!(tier.hits > 0 && tier.lookups >= tier.hits, "{}", report.summary());
        assert!(report.summary().contains("tier use"), "{}", report.summary());
        let line = report.result_line();
        assert_eq!(line.get("tier_hits"), Some(tier.hits.to_string().as_str()));
        assert_eq!(line.get("theta"), Some("0.80"));
        // Without one, the fields are zeros.
        let config = ServeConfig {
            durability: ferrite::Durability::None,
            ..tiny(ServeStore::Ferrite, tmp.path())
        };
        let report = run(&config, false).unwrap();
        assert!(report.tier.is_none());
        assert_eq!(report.result_line().get("tier_hits"), Some("0"));
    }

    #[test]
    fn ferrite_serves_a_short_run_every_value_checked() {
        let tmp = tempfile::tempdir().unwrap();
        for (zipfian, rate, client) in [
            (false, None, Client::Threads),
            (true, Some(4000.0), Client::Threads),
            (false, None, Client::Ring),
            (true, Some(4000.0), Client::Ring),
        ] {
            let config =
                ServeConfig { zipfian, rate, client, ..tiny(ServeStore::Ferrite, tmp.path()) };
            let report = run(&config, false).unwrap();
            assert!(report.gets > 0 && report.sets > 0, "{}", report.summary());
            assert_eq!(report.hit_ratio(), 1.0, "every key was loaded: {}", report.summary());
            let line = report.result_line();
            assert_eq!(line.get("store"), Some("ferrite"));
            assert_eq!(line.get("mix"), Some("90:10"));
            assert_eq!(line.get("client"), Some(client.name()));
            assert!(!config.dir.exists(), "removed after the run");
            // (Ferrite counts its evictions, and keeps no item count or flash tier.)
            assert_eq!(report.load.evictions, Some(0), "{}", report.summary());
            assert_eq!((report.load.items, report.flash_hits), (None, None));
        }
    }

    /// Multi-gets (every value checked, ops counting requests, GETs keys) and herds (every
    /// connection on one key a round, each round a new key).
    #[test]
    fn multigets_and_herds_are_measured() {
        let tmp = tempfile::tempdir().unwrap();
        let config = ServeConfig { multiget: 8, ..tiny(ServeStore::Ferrite, tmp.path()) };
        let report = run(&config, false).unwrap();
        assert_eq!(report.hit_ratio(), 1.0, "{}", report.summary());
        assert!(report.gets >= 7 * (report.ops - report.sets), "{}", report.summary());
        assert_eq!(report.result_line().get("multiget"), Some("8"));
        let config = ServeConfig {
            herd: true,
            get_percent: 100,
            connections: 16,
            value_size: 20_000,
            keys: 300,
            ..tiny(ServeStore::Ferrite, tmp.path())
        };
        let report = run(&config, false).unwrap();
        let rounds = report.herd_rounds();
        assert!(rounds > 0, "{}", report.summary());
        assert_eq!(report.gets, rounds * 16, "every connection once a round");
        assert_eq!(report.hit_ratio(), 1.0, "{}", report.summary());
        assert_eq!(report.result_line().get("herd_rounds"), Some(rounds.to_string().as_str()));
        // Refused: a herd with SETs, a rate, or the ring client; more keys a GET than loaded.
        for bad in [
            ServeConfig { herd: false, multiget: 8, keys: 7, ..config.clone() },
            ServeConfig { get_percent: 90, ..config.clone() },
            ServeConfig { rate: Some(100.0), ..config.clone() },
            ServeConfig { client: Client::Ring, ..config.clone() },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn ferrite_past_its_disk_budget_evicts_and_refuses_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        // 28 MB of items into a 16 MiB page file.
        let config = ServeConfig {
            keys: 28_000,
            value_size: 1000,
            disk_budget_mib: Some(16),
            durability: ferrite::Durability::None,
            ..tiny(ServeStore::Ferrite, tmp.path())
        };
        let report = run(&config, false).unwrap();
        assert_eq!(report.set_errors, 0, "{}", report.summary());
        let hits = report.hit_ratio();
        assert!(hits > 0.1 && hits < 0.9, "evicted some, kept some: {}", report.summary());
        assert_eq!(report.result_line().get("disk_budget_mib"), Some("16"));
    }

    #[test]
    fn memcached_with_extstore_serves_a_short_run() {
        if !memcached_installed() {
            let required = std::env::var("FERRITE_REQUIRE_PEERS").is_ok_and(|v| v == "1");
            assert!(!required, "FERRITE_REQUIRE_PEERS=1 but memcached is not installed");
            eprintln!("skipped: memcached is not installed");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let report = run(&tiny(ServeStore::Memcached, tmp.path()), false).unwrap();
        assert!(report.gets > 0, "{}", report.summary());
        assert!(report.store_description.contains("ext_path="), "{}", report.store_description);
        // The paced load kept every item (1.2 MB in 16 MiB), and memcached says so.
        assert_eq!(report.load.items, Some(2000), "{}", report.summary());
        assert_eq!(report.load.evictions, Some(0), "{}", report.summary());
        assert!(report.load.flash_items.is_some() && report.flash_hits.is_some());
        let line = report.result_line();
        assert_eq!(line.get("items_after_load"), Some("2000"));
        assert!(line.get("load_rate").is_some(), "{line}");
    }
}
