//! The help texts: `ferrite --help`, `ferrite COMMAND --help` (or `ferrite help COMMAND`),
//! and the one-line usages that argument errors repeat.

use ferrite_bench::io as bench_io;
use ferrite_bench::lookup;
use ferrite_bench::recovery;

/// Default pool of the data commands, in MiB.
pub const DEFAULT_POOL_MIB: u64 = 64;

pub const PUT_USAGE: &str =
    "ferrite put --db DIR --tree TREE [--hex] [--pool-mib M] [--no-direct] [--] KEY VALUE";
pub const GET_USAGE: &str =
    "ferrite get --db DIR --tree TREE [--hex] [--pool-mib M] [--no-direct] [--] KEY";
pub const DEL_USAGE: &str =
    "ferrite del --db DIR --tree TREE [--hex] [--pool-mib M] [--no-direct] [--] KEY";
pub const SCAN_USAGE: &str = "ferrite scan --db DIR --tree TREE [--from KEY] [--to KEY] \
     [--limit N] [--reverse] [--hex] [--pool-mib M] [--no-direct]";
pub const TREES_USAGE: &str =
    "ferrite trees --db DIR [--create NAME | --drop NAME] [--pool-mib M] [--no-direct]";
pub const STATS_USAGE: &str = "ferrite stats --db DIR [--quick] [--pool-mib M] [--no-direct]";
pub const CHECK_USAGE: &str = "ferrite check --db DIR [--pool-mib M] [--no-direct]";
pub const BENCH_USAGE: &str = "ferrite bench WORKLOAD [OPTIONS]   (workloads: lookup, fill, \
     fill-seq, fill-random, fill-sync, ycsb-a .. ycsb-f, compare, io, recovery)";
pub const WORKLOAD_USAGE: &str = "ferrite bench WORKLOAD [--store STORE] [--db DIR] \
     [--records N] [--cache-mib M] [--change-buffer-mib M] [--seconds S] [--threads T] [--workers N] [--tasks N] \
     [--direct-api] [--distribution uniform|zipfian] [--rate OPS] [--order seq|random] \
     [--sync] [--committers N] [--seed X] [--keep] [--no-direct] [--no-ceiling] [--json FILE]";
pub const COMPARE_USAGE: &str = "ferrite bench compare SUITE [--stores STORE[,STORE...]] \
     [--out DIR] [--db DIR] [--records N] [--cache-mib M] [--change-buffer-mib M] \
     [--seconds S] [--threads T] \
     [--workers N] [--tasks N] [--rate OPS] [--seed X] [--no-direct] [--no-ceiling] \
     [--rounds N]";
pub const LOOKUP_USAGE: &str = "ferrite bench lookup [--db DIR] [--keys N] [--pool-mib M] \
     [--seconds S] [--workers N] [--tasks N] [--engine ENGINE] [--devices PATH[,PATH...]] \
     [--direct-api] [--threads T] [--seed X] [--keep] [--no-direct] [--store ferrite] \
     [--json FILE]";
pub const IO_USAGE: &str = "ferrite bench io [--file PATH] [--engine ENGINE|all] \
     [--pattern PATTERN] [--bs BYTES] [--depth N] [--threads N] [--seconds S] [--size-mib M] \
     [--direct | --no-direct] [--keep]";
pub const RECOVERY_USAGE: &str = "ferrite bench recovery [--db DIR] [--seconds S[,S...]] \
     [--committers N] [--workers N] [--cache-mib M] [--checkpoint-mib M] [--keep] [--no-direct] \
     [--json FILE]";
pub const TOP_USAGE: &str = "ferrite COMMAND --db DIR [OPTIONS] [ARGUMENTS]";

const COMMON: &str = "\
COMMON OPTIONS
    --db DIR         the data directory (required)
    --pool-mib M     buffer pool size in MiB (default 64, at least 1)
    --no-direct      buffered I/O instead of O_DIRECT (for file systems that refuse
                     O_DIRECT, such as tmpfs)
    -h, --help       print this help";

fn keys_and_values() -> String {
    format!(
        "\
KEYS AND VALUES
    Keys (1 to {} bytes) and values (0 to {} bytes) are given and printed as text:
    an argument's bytes are taken as they are. With --hex they are given and printed
    in hexadecimal instead (two digits a byte, either case, optional 0x prefix), for
    binary data. Put `--` before a KEY or VALUE that begins with '-'.",
        ferrite::MAX_KEY_LEN,
        ferrite::MAX_VALUE_LEN
    )
}

/// What a failed close after a committed change means for the exit status.
const CLOSE_AFTER_CHANGE: &str =
    "    If only closing the data directory fails afterwards (a full disk, say), the change
    stands: it is durable in the write-ahead log, the exit status is the change's, and a
    warning on stderr says that the next open for writing (put, del, trees --create or
    --drop) applies it.";

// (Not a `"\` continuation: that would eat the first line's indentation.)
const READ_ONLY: &str =
    "    This command never creates a data directory: pointed at a directory that is
    not one, it says so and exits with status 2.";

/// Widest line of a wrapped usage.
const USAGE_WIDTH: usize = 92;

/// `usage` after `lead`, wrapped between words (never inside a `[...]` group), continuation
/// lines indented past the command's name.
pub fn wrap_usage(lead: &str, usage: &str) -> String {
    let mut words: Vec<String> = Vec::new();
    let mut depth = 0i32;
    for word in usage.split(' ') {
        match words.last_mut() {
            Some(last) if depth > 0 => {
                last.push(' ');
                last.push_str(word);
            }
            _ => words.push(word.to_owned()),
        }
        depth += word.matches('[').count() as i32 - word.matches(']').count() as i32;
    }
    // Continuation lines start under the first option: after "ferrite get ".
    let command_words =
        words.iter().take_while(|w| !w.starts_with('-') && !w.starts_with('[')).count();
    let indent = lead.len() + words[..command_words].iter().map(|w| w.len() + 1).sum::<usize>();
    let indent = if indent > USAGE_WIDTH / 2 { lead.len() + 4 } else { indent };
    let mut out = lead.to_owned();
    let mut column = lead.len();
    for (i, word) in words.iter().enumerate() {
        if i > 0 {
            if i >= command_words && column + 1 + word.len() > USAGE_WIDTH {
                out.push('\n');
                out.push_str(&" ".repeat(indent));
                column = indent;
            } else {
                out.push(' ');
                column += 1;
            }
        }
        out.push_str(word);
        column += word.len();
    }
    out
}

fn page(summary: &str, usage: &str, sections: &[&str]) -> String {
    let mut text = format!("{summary}\n\nUSAGE\n{}\n", wrap_usage("    ", usage));
    for section in sections {
        text.push('\n');
        text.push_str(section.trim_end());
        text.push('\n');
    }
    text
}

pub fn top() -> String {
    page(
        "ferrite: store, inspect, check and benchmark Ferrite data directories",
        TOP_USAGE,
        &[
            "\
COMMANDS
    put      store a value under a key (creates the directory and tree if needed)
    get      print the value of a key
    del      remove a key
    scan     print the entries of a key range
    trees    list, create or drop trees
    stats    print file, pool and per-tree numbers
    check    verify every page and tree, and the write-ahead log; report every fault
    bench    run a benchmark workload (ferrite bench lookup, ferrite bench io)
    help     print the help of a command: ferrite help COMMAND

    Run `ferrite COMMAND --help` for a command's arguments and options.",
            COMMON,
            "\
EXIT STATUS
    0    success
    1    the key is absent (get, del), or check found faults
    2    an error: bad arguments, a directory that is not a Ferrite data directory, an
         I/O error, corrupt data, a failed benchmark, output that cannot be written
         (a command that prints checks standard output before it starts: closed, not
         open for writing, a full device); the message starts with \"ferrite: \" on
         stderr. A reader that goes away (ferrite scan | head) ends a command quietly.

    The status is the operation's. A change that was made (put, del, trees --create or
    --drop: durable in the write-ahead log when made) exits 0 even if closing the data
    directory afterwards fails, with a warning on stderr saying the next open for
    writing applies it; a read whose data was printed likewise exits 0 with a warning.",
        ],
    )
}

pub fn put() -> String {
    page(
        "Store VALUE under KEY in tree TREE (replacing any value the key had), then close the\n\
         data directory cleanly. The directory and the tree are created if they do not exist.\n\
         The put is durable before the close begins (it is in the synced write-ahead log):\n\
         a crash during the close keeps it.",
        PUT_USAGE,
        &[
            "\
OPTIONS
    --tree TREE      the tree (created if it does not exist)
    --hex            KEY and VALUE are hexadecimal",
            &keys_and_values(),
            COMMON,
            &format!(
                "\
EXIT STATUS
    0 when the put was made, 2 when it failed.
{CLOSE_AFTER_CHANGE}"
            ),
        ],
    )
}

pub fn get() -> String {
    page(
        "Print the value of KEY in tree TREE, followed by a newline.",
        GET_USAGE,
        &[
            "\
OPTIONS
    --tree TREE      the tree
    --hex            KEY is given, and the value printed, in hexadecimal",
            "\
OUTPUT
    The value's bytes as they are when it is UTF-8 text. A value that is not UTF-8 is
    printed with each invalid byte as \\xNN (and each backslash as \\\\), with a note on
    stderr; use --hex for the exact bytes.",
            &keys_and_values(),
            COMMON,
            &format!(
                "\
EXIT STATUS
    0 when the key was found, 1 when it is absent (nothing is printed on stdout), 2 on
    an error (including a tree that does not exist).
{READ_ONLY}"
            ),
        ],
    )
}

pub fn del() -> String {
    page(
        "Remove KEY from tree TREE. The removal is durable before the data directory is closed\n\
         (it is in the synced write-ahead log): a crash during the close keeps it.",
        DEL_USAGE,
        &[
            "\
OPTIONS
    --tree TREE      the tree
    --hex            KEY is hexadecimal",
            &keys_and_values(),
            COMMON,
            &format!(
                "\
EXIT STATUS
    0 when the key was removed, 1 when it was absent, 2 on an error (including a tree or
    data directory that does not exist: del creates neither).
{CLOSE_AFTER_CHANGE}"
            ),
        ],
    )
}

pub fn scan() -> String {
    page(
        "Print the entries of tree TREE whose keys lie in the range [FROM, TO), in key order,\n\
         one line per entry: KEY, a tab, VALUE.",
        SCAN_USAGE,
        &[
            "\
OPTIONS
    --tree TREE      the tree
    --from KEY       the range starts at KEY, inclusive (default: the first key)
    --to KEY         the range ends before KEY, exclusive (default: after the last key)
    --limit N        print at most N entries (default: all)
    --reverse        walk the same range backwards: from the last key below TO down to
                     FROM; with --limit, the N largest keys of the range
    --hex            FROM and TO are given, and keys and values printed, in hexadecimal",
            "\
OUTPUT
    One line per entry. As text, every key and value is escaped so that an entry stays on
    one line: \\\\ for a backslash, \\t, \\n, \\r, \\xNN for other control characters and
    for bytes that are not UTF-8. Use --hex for exact bytes.",
            &keys_and_values(),
            COMMON,
            &format!("NOTES\n{READ_ONLY}"),
        ],
    )
}

pub fn trees() -> String {
    page(
        "List the trees of a data directory, one name per line in name order; or create or\n\
         drop one.",
        TREES_USAGE,
        &[
            "\
OPTIONS
    --create NAME    create tree NAME (an error if it exists); creates the data directory
                     if it does not exist
    --drop NAME      drop tree NAME and free its pages (an error if it does not exist)",
            COMMON,
            &format!(
                "\
NOTES
    Listing never creates a data directory. Names are escaped like scan's text output.
    --create and --drop are durable once made (in the synced write-ahead log).

EXIT STATUS
    0 when the trees were listed or the tree created or dropped, 2 on an error.
{CLOSE_AFTER_CHANGE}"
            ),
        ],
    )
}

pub fn stats() -> String {
    page(
        "Print the numbers of a data directory: its page file (pages in use, free pages, size\n\
         on disk), its buffer pool, and per tree the keys, pages and depth.",
        STATS_USAGE,
        &[
            "\
OPTIONS
    --quick          skip the per-tree numbers

    The per-tree numbers are counted by walking every page of every tree, as check does,
    so on a large data set they take as long as a check; --quick prints only the numbers
    known without reading the trees.",
            COMMON,
            &format!("NOTES\n{READ_ONLY}"),
        ],
    )
}

pub fn check() -> String {
    page(
        "Verify a data directory: every page's checksum and identity, every tree's structure\n\
         (key order, fences, depth), the page accounting (each page used once or free, none\n\
         lost), and the write-ahead log. Prints what was checked, per tree and in total, and\n\
         every fault found.",
        CHECK_USAGE,
        &[
            COMMON,
            "\
OUTPUT
    The trees' table and a pages line, then the log's lines:

    log: N segments in DIR/wal; last checkpoint at position P, replay from R
    log: N records verified from there to the end (position E): C commits, I page images

    Positions are byte offsets in the log. Every record from the replay position to the
    end, what recovery replays, is read and its checksum verified (after a clean close
    there is little more than the close's checkpoint). Torn bytes after the end, a log
    write a crash cut short and never acknowledged, get a line of their own: recovery
    drops them. Damage (a log sector whose checksum fails, a record that does not decode
    although its bytes were written whole, a missing or damaged segment) is a fault naming
    the segment file, the byte and the log position: recovery refuses the directory, and
    its pages are then not checked.

    Then one line per fault, `fault: ...`, and `ok: no faults found` or
    `FAILED: N faults [and P lost pages] found`. Pages neither in use nor free (lost)
    come last, on one line of page ranges (`fault: 615 pages neither in use nor free
    (lost): 4-618`; past 160 characters the rest is counted, not listed): a node that
    cannot be read hides every page below it from the walk, and its own fault is printed
    before them.",
            "\
NOTES
    A directory that was not closed cleanly (a crash, a killed process) is checked as
    recovered: its log is replayed into memory and the pages checked as recovery leaves
    them; nothing on disk changes (a command that opens it for writing, put or del,
    recovers it on disk). Both superblock copies are read: a damaged one is a fault until
    the next write replaces it.",
            &format!(
                "\
EXIT STATUS
    0 when no fault was found, 1 when faults were found (in the pages or the log), 2 when
    the data could not be checked at all (for example a corrupt page on the way to the
    trees: the error says which page).
{READ_ONLY}"
            ),
        ],
    )
}

pub fn bench() -> String {
    page(
        "Run a benchmark workload against Ferrite.",
        BENCH_USAGE,
        &["\
WORKLOADS
    lookup     uniform random point lookups over a data set ~10x the pool, every value
               verified (ferrite bench lookup --help); with --store PEER, the comparison
               workload of the same name (ferrite bench ycsb-a --help)
    fill       inserts into an empty store, in random (default) or key order (--order);
               with --sync each insert is acknowledged only once durable, from
               --committers N concurrent committers (fill-sync)
    ycsb-a .. ycsb-f
               the YCSB workloads on Ferrite or a peer: --store ferrite|rocksdb|
               wiredtiger|lmdb (ferrite bench ycsb-a --help)
    compare    a named suite of workloads on every store built in, written as markdown
               tables, JSON lines and charts (ferrite bench compare --help)
    io         the raw device ceiling: reads or writes through each I/O engine, and fio
               with the same parameters when it is installed (ferrite bench io --help)
    recovery   durable inserts for runs of growing length, each ended by a crash: recovery
               time and the log on disk stay bounded (ferrite bench recovery --help)

    Every workload prints a human-readable summary and ends with one line
    `result name=value ...` of plain numbers, for scripts."],
    )
}

pub fn bench_lookup() -> String {
    page(
        "Load N keys into tree \"bench\" (key i is the 8-byte big-endian integer i, its value\n\
         120 bytes derived from i), then look up keys drawn uniformly from 0..N from T threads\n\
         for S seconds after a warm-up of min(5, S/4) seconds, checking every value read.",
        LOOKUP_USAGE,
        &[
            &format!(
                "\
OPTIONS
    --db DIR         the data directory (default {dir});
                     it must hold no trees but the benchmark's (\"bench\", \"bench-meta\")
    --keys N         keys to load (default {keys}, also 20k, 4.6M style); the default
                     makes the data about 10x the default pool: an entry takes 138 bytes
                     (8-byte key, 120-byte value, 10-byte slot) and the key-order load
                     fills leaves, so 4.6 M keys take ~650 MiB (the summary shows the size)
    --pool-mib M     buffer pool size in MiB (default {pool}, at least 1)
    --seconds S      measured time in seconds (default {seconds}; fractions allowed)
    --workers N      worker threads running lookup tasks (default: the number of cores,
                     {workers} here)
    --tasks N        lookup tasks in flight per worker (default {tasks})
    --engine ENGINE  how the workers issue I/O: io_uring, aio, psync or mmap (default
                     io_uring; see ferrite bench io --help)
    --devices PATH[,PATH...]
                     the devices (files or block devices) the data is striped over, in
                     order (default: the single page file in --db)
    --direct-api     look up through the blocking API from --threads threads instead of
                     tasks on workers
    --threads T      lookup threads of the blocking API (default 1)
    --seed X         seed of the key draws (default {seed}; decimal or 0x hex)
    --keep           keep the data directory; a later run with the same --db and --keys
                     reuses the data instead of loading it again (tree \"bench-meta\"
                     records what was loaded). Without --keep the directory (and the
                     parents the run created) is removed at the end.
    --no-direct      buffered I/O instead of O_DIRECT
    --store STORE    ferrite (this benchmark); another store runs the comparison workload
                     `lookup` on it (ferrite bench ycsb-a --help)
    --json FILE      append the result as one JSON object to FILE (opened, or created,
                     before the run: a FILE that cannot be appended to fails at once)
    -h, --help       print this help",
                dir = lookup::DEFAULT_DIR,
                keys = lookup::DEFAULT_KEYS,
                pool = lookup::DEFAULT_POOL_MIB,
                seconds = lookup::DEFAULT_SECONDS,
                seed = lookup::DEFAULT_SEED,
                workers = lookup::LookupConfig::default().workers,
                tasks = lookup::LookupConfig::default().tasks,
            ),
            "\
OUTPUT
    Load progress on stderr (a bar redrawn in place on a terminal, a line every 10%
    otherwise). On stdout a summary: load time and rate, data size on disk (pages x
    4 KiB) and its ratio to the pool, lookups per second, latency percentiles from a
    log-bucket histogram (within 1/16), device reads per lookup, CPU (user + system)
    per lookup. With tasks (the default) also the device's random-read ceiling (4 KiB
    random reads on the page file through io_uring at queue depth 128, just before and
    just after the lookups, 3 s each or S/4 for runs under 12 s) and the mean of both,
    the ratio of lookups/s to that mean, and the share of worker time spent in tree
    work (running tasks), eviction, I/O submission, completion handling and idle.
    The last line is:

    result lookups_per_s=N keys=N pool_mib=M threads=T seconds=S lookups=N data_mib=D
           data_pool_ratio=R reads_per_lookup=R [device_iops=N ratio=X
           device_iops_before=N device_iops_after=N mode=tasks workers=N tasks=N
           engine=E tree_pct=P evict_pct=P submit_pct=P complete_pct=P idle_pct=P]
           cpu_us_per_lookup=X p50_us=L p99_us=L max_us=L load_s=S reused=0|1 seed=X
           direct_io=0|1 store=ferrite workload=lookup ops_per_s=N

    (on one line; the bracketed fields with tasks only, mode=direct otherwise). A wrong
    or missing value ends the run with exit status 2 and no result line.",
        ],
    )
}

pub fn bench_workload() -> String {
    page(
        "Run one comparison workload on one store: load the data set (or reuse one kept by an\n\
         earlier run), measure the device's random-read ceiling, then run the operations for\n\
         S seconds after a warm-up of min(5, S/4) s, every value read checked.",
        WORKLOAD_USAGE,
        &[
            "\
WORKLOADS
    lookup         point reads of loaded keys (uniform unless --distribution)
    fill           inserts of --records new keys into an empty store (fill-seq: key order,
                   fill-random: random order; `fill --order seq|random` says the same)
    fill --sync    (also fill-sync) durable inserts: --committers N concurrent committers
                   each insert a new key in random order and wait until it is durable before
                   the next. Every store syncs each commit: Ferrite Durability::Sync, RocksDB
                   its WAL with WriteOptions.sync, WiredTiger its log with transaction_sync
                   (fsync), LMDB without MDB_NOSYNC. Ends after --records keys or --seconds,
                   whichever comes first; then the store is closed and reopened and every
                   acknowledged key read back (outside the measured time). Every other
                   workload runs with the logs off (Ferrite Durability::None) on every store.
    ycsb-a         50 % reads, 50 % updates          ycsb-b   95 % reads, 5 % updates
    ycsb-c         100 % reads                       ycsb-d   95 % reads of the latest
                                                              keys, 5 % inserts
    ycsb-e         95 % scans of 1-100 entries, 5 % inserts
    ycsb-f         50 % reads, 50 % read-modify-writes
    YCSB keys are zipfian (theta 0.99, scrambled) unless --distribution uniform.

OPTIONS
    --store STORE    ferrite (default), rocksdb, wiredtiger or lmdb; the peers need a build
                     with --features peers and their Debian -dev packages
    --db DIR         the store's data directory (default ferrite-data/bench-STORE); fills
                     use DIR-fill, emptied first; both removed at the end unless --keep
    --records N      keys loaded (fills: keys inserted), default 4.6M (~10x the default
                     cache); --keys N is the same
    --cache-mib M    cache of every store, MiB (default 64): Ferrite's pool, RocksDB's block
                     cache, WiredTiger's cache; LMDB has none (it uses the page cache)
    --change-buffer-mib M
                     Ferrite only: MiB of the cache its change buffer (puts into leaves not
                     in memory) may borrow from the frames once puts need it; 0 turns it off
                     (default: a quarter of the cache from 16 MiB up, at most 128)
    --seconds S      measured time (default 20)
    --threads T      threads of the peers (and of Ferrite with --direct-api); default: cores
    --workers N      Ferrite's workers (default: cores)
    --tasks N        Ferrite's tasks per worker (default 64)
    --direct-api     Ferrite through its blocking API on --threads threads (fill --sync:
                     on --committers threads)
    --sync           fill only: acknowledge each insert once durable (fill-sync, above)
    --committers N   fill --sync only: concurrent committers (default 1): threads for the
                     peers and with --direct-api, else Ferrite tasks spread over --workers;
                     --threads and --tasks do not apply to it
    --distribution D uniform or zipfian
    --rate OPS       open loop: offer OPS operations/s in all (Poisson arrivals); latency
                     counts from each operation's scheduled arrival. Default: closed loop
    --seed X         seed of the operation streams (default 1)
    --keep           keep the data directory after the run: loaded data for the next run
                     with the same --records to reuse; a fill's DIR-fill to look at
                     (ferrite check, say), which the next fill empties first
    --no-direct      buffered I/O instead of O_DIRECT
    --no-ceiling     skip the device ceiling (it writes a 1 GiB file beside DIR once)
    --json FILE      append one JSON object per run to FILE (with a hash of the
                     configuration: runs with the same `config` measured the same thing);
                     FILE is opened, or created, before the run: one that cannot be
                     appended to fails at once",
            "\
OUTPUT
    Load progress on stderr; on stdout a summary (throughput, operation counts, latency
    percentiles from an HdrHistogram, CPU per operation, device reads, writes and cache
    flushes per operation from /proc/diskstats, bytes on disk, the device ceiling), then
    one line:

    result store=S workload=W ops_per_s=N seconds=S ops=N p50_us=L p99_us=L p999_us=L
           max_us=L cpu_us_per_op=X user_us_per_op=X sys_us_per_op=X
           [dev_reads_per_op=X dev_writes_per_op=X]
           [dev_flushes_per_op=X] [log_writes=N log_records_per_write=X
           log_kib_per_write=X log_write_us=X] [buffer_drains=N
           buffer_entries_per_drain=X] [worker_task_us_per_op=X
           worker_submit_us_per_op=X worker_complete_us_per_op=X worker_evict_us_per_op=X
           worker_idle_pct=X] [mem_mib=X mem_cache_mib=X mem_write_buffers_mib=X]
           bytes_on_disk=N records=N [load_s=S] [reused=0|1]
           [device_iops=N] mode=tasks|threads threads=N workers=N tasks=N
           [committers=N sync=1 verified=N] distribution=D loop=closed|open
           [target_ops_per_s=N] cache_mib=M seed=X config=HASH

    dev_flushes_per_op counts device cache flushes (what fsync/fdatasync send a disk with
    a volatile write cache) on kernels that report them. The log_ fields (Ferrite, when
    its log wrote while measuring): group-commit writes, records (commits, page images,
    checkpoints) and KiB per write, and the mean time from taking a write to its being
    durable. The buffer_ fields (Ferrite, when its change buffer drained while
    measuring): drains, each a leaf read that moves the puts buffered for that leaf into
    it, and the entries each moved. The worker_ fields (Ferrite with tasks on its
    workers): the workers' time per operation polling tasks (tree work, commits),
    submitting I/O, reaping completions and evicting, and the share of their time they
    waited with nothing to do. The mem_ fields (stores that say: Ferrite, RocksDB): the
    most data the store held in memory while measuring, sampled every 0.5 s: its cache
    (Ferrite's frames, dirty pages included; RocksDB's block cache) plus write buffers
    (Ferrite's change buffer, whose budget comes out of the pool's memory; RocksDB's
    memtables). fill-sync adds committers, sync=1 and verified (keys read back after
    reopening); its tasks= counts the committer tasks over all workers (the other
    workloads: tasks per worker).",
        ],
    )
}

pub fn bench_compare() -> String {
    page(
        "Run a suite of workloads on every store built in (or --stores) and write the tables\n\
         that go into docs/benchmarks.md: workloads as rows, stores as columns, the best of\n\
         each row in bold, with the machine and the commit named.",
        COMPARE_USAGE,
        &[
            "\
SUITES
    quick          lookup, ycsb-a, ycsb-c, ycsb-e, fill-random
    ycsb           ycsb-a .. ycsb-f (zipfian)
    lookup-sweep   lookups with 1..256 peer threads and Ferrite at 1x64, 2x64, 2x128 tasks
    ycsb-sweep     ycsb-a and ycsb-c with 2, 16, 64, 256 peer threads and Ferrite at 1x64, 2x64
    sync           fill --sync with 1, 8 and 64 committers on every store
    all            all of the above but sync, YCSB also uniform, and fill-seq

OPTIONS
    --stores LIST    the stores to run (default: every store built in)
    --out DIR        where SUITE.md, SUITE.jsonl and the charts go (default bench-results);
                     DIR and SUITE.jsonl are made before the runs: a DIR that cannot be
                     made or written to fails at once
    --db DIR         root of the stores' data directories (default ferrite-data/compare);
                     each store's data set is loaded once and kept for the suite's runs
    --rounds N       run the whole suite N times, one round after the other (default 1,
                     at most 100); each table cell is then the run with the median
                     operations/s, and the tables are followed by Ferrite's operations/s
                     over RocksDB's for each row and round, with their median
    The other options are those of the workloads (ferrite bench ycsb-a --help) and apply
    to every run.",
            "\
OUTPUT
    A line per run on stderr; the tables on stdout, then
    result suite=NAME stores=LIST runs=N failed=N
    (runs counts every round's.) Exit status 1 when a run failed (the tables show what did run).",
        ],
    )
}

pub fn bench_recovery() -> String {
    page(
        "Show that recovery time and the log on disk stay bounded as a run gets longer. For\n\
         each length S of --seconds, in a fresh database: N committers insert new random keys\n\
         (8 bytes, 120-byte values), each acknowledged once durable, for S seconds; then the\n\
         database is given up as a crash would, reopened (recovery replays the log from the\n\
         last checkpoint) and every acknowledged key is read back.",
        RECOVERY_USAGE,
        &[
            &format!(
                "\
OPTIONS
    --db DIR         the data directory (default {dir});
                     emptied before each run, removed at the end. A directory that
                     ferrite bench did not make is never emptied: the run stops instead.
    --seconds S[,S...]
                     the run lengths, one run each, in order (default {seconds}); fractions
                     allowed (0.5), at least 1 ms each, at most {runs} runs
    --committers N   concurrent committers (default {committers}): tasks spread round robin
                     over the workers, each inserting and waiting until the insert is
                     durable (Durability::Sync) before the next, as fill --sync does
    --workers N      Ferrite's workers (default: the number of cores)
    --cache-mib M    Ferrite's pool, MiB (default {cache})
    --checkpoint-mib M
                     a checkpoint starts once M MiB were logged since the last
                     (Options::checkpoint_log_bytes; default {checkpoint}, the engine's).
                     Log segments are the engine's default ({segment} MiB) but at most M MiB:
                     a checkpoint frees whole segments only
    --keep           keep the last run's data directory (for ferrite check, say)
    --no-direct      buffered I/O instead of O_DIRECT
    --json FILE      append one JSON object per run to FILE (the result line's fields);
                     opened, or created, before the runs: a FILE that cannot be appended
                     to fails at once
    -h, --help       print this help",
                dir = recovery::DEFAULT_DIR,
                seconds = recovery::DEFAULT_SECONDS.map(recovery::seconds_text).join(","),
                runs = recovery::MAX_RUNS,
                committers = recovery::DEFAULT_COMMITTERS,
                cache = recovery::DEFAULT_CACHE_MIB,
                checkpoint = recovery::default_checkpoint_mib(),
                segment = ferrite::Options::default().log_segment_bytes >> 20,
            ),
            "\
MEASUREMENT
    While the committers run, the log bytes on disk that a recovery may read (from the
    first segment in use to the end) are sampled every 100 ms; the largest is \"log max\".
    The crash is Db::abandon: the workers stop, no final checkpoint is taken and nothing
    more is written (a checkpoint under way is let finish). The files keep every write
    made, so the reopen sees what a power cut would leave (without torn writes). The
    reopen is timed on the wall clock (\"open\": recovery, then the checkpoint every open
    takes); \"recovery\" is the replay alone, from the engine's recovery report, with the
    log bytes and records it replayed and the pages it changed. A key missing, wrong or
    never inserted after the reopen fails the run: it is marked FAILED in the table and
    prints no result line, the other runs go on, and the command then exits with status
    2 (a failed last run leaves its directory, for ferrite check).

    A checkpoint starts once the interval was logged since the last one began, and frees
    the segments below its start when it ends: the log on disk peaks near the interval,
    plus a segment, plus what is logged while a checkpoint writes the dirty pages back
    (twice that when checkpoints outlast the logging of an interval), however long the
    run. Recovery replays at most about as much.",
            "\
OUTPUT
    Progress and a line per step on stderr. On stdout a table, one row per run: inserts
    and inserts/s, log written, log max and its ratio to the checkpoint interval, log
    replayed, records replayed, pages applied, recovery and open time, log segment files,
    keys verified and mismatches; then the longest run against the shortest (ratios of inserts, log
    written, recovery and open time, log replayed, log max) and the largest log on disk
    against the checkpoint interval. Then one line per passing run:

    result workload=recovery seconds=S ops=N ops_per_s=N log_max_bytes=N
           replayed_bytes=N replayed_records=N recovery_ms=X open_ms=X
           checkpoint_bytes=N verified=N pages_applied=N torn_bytes=N
           log_written_bytes=N log_files=N segment_bytes=N run_s=S verify_s=S
           store=ferrite sync=1 committers=N workers=N cache_mib=M",
        ],
    )
}

pub fn bench_io() -> String {
    page(
        "Measure the raw device: keep requests in flight through one of Ferrite's I/O engines\n\
         (each thread its own engine instance) and count what completes; then run fio with the\n\
         same parameters on the same file when fio is on PATH. The ceiling every other\n\
         benchmark is compared with.",
        IO_USAGE,
        &[
            &format!(
                "\
OPTIONS
    --file PATH      the data file (default {file}); created and
                     filled with data up to --size-mib if missing or smaller, removed at
                     the end unless --keep. A block device is accepted for read patterns
                     (only read). An existing file that is not a bench io data file is
                     only ever read: never extended, written or removed.
    --engine ENGINE  io_uring, aio, psync, mmap, or all (default io_uring); with all,
                     every engine is measured in turn and the result line is io_uring's
    --pattern P      randread, seqread, randwrite or seqwrite (default randread)
    --bs BYTES       bytes per request, a multiple of 4096 (default {bs}; 4k, 64KiB,
                     1m style allowed)
    --depth N        requests in flight per thread (default {depth}); psync and mmap
                     perform each request inside submit and run at depth 1, as fio does
    --threads N      threads, each with its own engine (default 1)
    --seconds S      measured time per engine (default {seconds}), after a warm-up of
                     min(1, S/5) seconds; fractions allowed
    --size-mib M     the part of the file the requests cover, from its start, in MiB
                     (default {size})
    --direct         O_DIRECT (the default)
    --no-direct      buffered I/O through the page cache (the cache is dropped before
                     each engine)
    --keep           keep the data file for the next run
    -h, --help       print this help",
                file = bench_io::DEFAULT_FILE,
                bs = bench_io::DEFAULT_BS,
                depth = bench_io::DEFAULT_DEPTH,
                seconds = bench_io::DEFAULT_SECONDS,
                size = bench_io::DEFAULT_SIZE_MIB,
            ),
            "\
MEASUREMENT
    Each thread queues requests until its engine is full, submits them in one batch,
    reaps with wait, and queues again: random patterns draw block-aligned offsets
    uniformly, sequential ones walk the file from its start and wrap. Latency runs from
    the submit that sent a request to the reap that returned it. CPU per I/O is the
    process's processor time (user + system) while measuring over the I/Os completed.
    mmap reads come from the page cache whatever --direct says (mappings ignore
    O_DIRECT).

    With fio on PATH, fio runs the same job after each engine: --ioengine=io_uring,
    libaio, psync or mmap, --direct, --rw, --bs, --iodepth, --numjobs, --size,
    --time_based --runtime with the same warm-up as --ramp_time, --thread
    --group_reporting --norandommap, --output-format=json; the table shows its IOPS
    and ours over fio's.",
            "\
OUTPUT
    A table with one row per engine: IOPS, MiB/s, latency p50/p99/p99.9, CPU per I/O,
    fio's IOPS and the ratio. The last line is:

    result iops=N engine=E depth=N threads=N pattern=P bs=N mib_per_s=R p50_us=L
           p99_us=L p999_us=L cpu_us_per_io=R seconds=S direct=0|1
           [fio_iops=N ratio=R]

    (on one line; fio_iops and ratio only when fio ran). With --engine all it is
    io_uring's.",
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usages_wrap_between_groups() {
        assert_eq!(
            wrap_usage("usage: ", "ferrite check --db DIR"),
            "usage: ferrite check --db DIR"
        );
        let wrapped = wrap_usage("    ", SCAN_USAGE);
        let lines: Vec<&str> = wrapped.lines().collect();
        assert_eq!(lines.len(), 2, "{wrapped}");
        assert!(lines[0].starts_with("    ferrite scan --db DIR"), "{wrapped}");
        assert!(lines[1].starts_with("                 ["), "{wrapped}");
        for line in &lines {
            assert!(line.len() <= USAGE_WIDTH, "{line}");
            assert_eq!(line.matches('[').count(), line.matches(']').count(), "{line}");
        }
    }

    #[test]
    fn every_page_has_a_usage_and_fits_in_100_columns() {
        for (text, usage) in [
            (top(), TOP_USAGE),
            (put(), PUT_USAGE),
            (get(), GET_USAGE),
            (del(), DEL_USAGE),
            (scan(), SCAN_USAGE),
            (trees(), TREES_USAGE),
            (stats(), STATS_USAGE),
            (check(), CHECK_USAGE),
            (bench(), BENCH_USAGE),
            (bench_lookup(), LOOKUP_USAGE),
            (bench_io(), IO_USAGE),
            (bench_workload(), WORKLOAD_USAGE),
            (bench_compare(), COMPARE_USAGE),
            (bench_recovery(), RECOVERY_USAGE),
        ] {
            let words: Vec<&str> = text.split_whitespace().collect();
            let usage_words: Vec<&str> = usage.split_whitespace().collect();
            assert!(words.windows(usage_words.len()).any(|w| w == usage_words), "{usage}");
            for line in text.lines() {
                assert!(line.chars().count() <= 100, "too long: {line}");
                assert_eq!(line.trim_end(), line, "trailing blanks: {line:?}");
            }
        }
    }
}
