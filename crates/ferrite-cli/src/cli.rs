//! The command line, declared once with clap's derive: each command's arguments, their value
//! parsers (`value`), usage, help and typo suggestions come from the declarations below, so
//! the help cannot drift from what is parsed.
//!
//! `Cli::parse_args` turns the arguments into an [`Action`]: the data commands' arguments
//! (keys decoded as text or hex) or a benchmark's configuration from `ferrite-bench`. One
//! small function per configuration converts the parsed options into it, and refuses the
//! combinations that do not apply. Every error (clap's or a conversion's) becomes a
//! [`UsageError`]: a message, the command's usage and where to read more, exit status 2.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

use clap::builder::OsStringValueParser;
use clap::builder::TypedValueParser as _;
use clap::error::ErrorKind;
use clap::{ArgAction, Args, CommandFactory, Parser, Subcommand};
use clap_complete::Shell;

use ferrite::io::EngineKind;
use ferrite_bench::stores::objects::ObjectStoreKind;
use ferrite_bench::stores::StoreKind;
use ferrite_bench::workloads::io::{self as bench_io, IoBenchConfig, Pattern};
use ferrite_bench::workloads::lookup::{self, LookupConfig};
use ferrite_bench::workloads::objects::{self, ObjectsConfig};
use ferrite_bench::workloads::recovery::{default_checkpoint_bytes, RecoveryConfig};
use ferrite_bench::workloads::run::{RocksDbTier, RunConfig, TierConfig};
use ferrite_bench::workloads::serve::{self as serve_bench, ServeConfig, ServeStore};
use ferrite_bench::workloads::tpcc::{run::MAX_WAREHOUSES, TpccConfig};
use ferrite_bench::workloads::ycsb::{Distribution, Workload};

use crate::encoding::decode_arg;
use crate::value::{self, FileArg, Order, MAX_COMMITTERS, MAX_POOL_MIB, MAX_ROUNDS};

/// Default pool of the data commands, in MiB.
pub const DEFAULT_POOL_MIB: u64 = 64;

/// The `ferrite` command line.
#[derive(Debug, Parser)]
#[command(
    name = "ferrite",
    version,
    about = "ferrite: store, inspect, check and benchmark Ferrite data directories",
    long_about = "ferrite: store, inspect, check and benchmark Ferrite data directories.\n\n\
        Run `ferrite COMMAND --help` (or `ferrite help COMMAND`) for a command's arguments \
        and options.",
    after_long_help = TOP_AFTER,
    subcommand_required = true,
    max_term_width = 100
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// `text` with the engine's key and value limits in place of their names.
fn with_limits(text: &str) -> String {
    text.replace("MAX_KEY_LEN", &ferrite::MAX_KEY_LEN.to_string())
        .replace("MAX_VALUE_LEN", &ferrite::MAX_VALUE_LEN.to_string())
        .replace("MAX_OBJECT_LEN", &ferrite::MAX_OBJECT_LEN.to_string())
}

const TOP_AFTER: &str = "\
EXIT STATUS
    0    success
    1    the key is absent (get, del, read-at, stat), or check found faults
    2    an error: bad arguments, a directory that is not a Ferrite data directory, an
         I/O error, corrupt data, a failed benchmark, a --value-file that cannot be read,
         output that cannot be written (a command that prints checks standard output
         before it starts: closed, not open for writing, a full device; --output PATH is
         opened before it starts too); the message starts with \"ferrite: \" on stderr.
         A reader that goes away (ferrite scan | head) ends a command quietly.

    The status is the operation's. A change that was made (put, write-at, del, trees
    --create or --drop: durable in the write-ahead log when made) exits 0 even if
    closing the data directory afterwards fails, with a warning on stderr saying the
    next open for writing applies it; a read whose data was printed likewise exits 0
    with a warning.

LOGGING
    What the engine logs goes to stderr; RUST_LOG chooses the level (default warn),
    RUST_LOG=info ferrite check --db DIR, say.

EXAMPLES
    ferrite put --db data --tree t apple red
    ferrite get --db data --tree t apple
    ferrite put --db data --tree files photo --value-file photo.jpg
    ferrite get --db data --tree files photo --output copy.jpg
    ferrite scan --db data --tree t --from a --to m --limit 10
    ferrite check --db data
    ferrite bench lookup --keys 4.6M --pool-mib 64 --seconds 20
    ferrite completions bash > /etc/bash_completion.d/ferrite";

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Store a value under a key (creates the directory and tree if needed)
    #[command(
        long_about = "Store VALUE, or the bytes of file PATH (--value-file), under KEY in tree \
            TREE (replacing any value the key had), then close the data directory cleanly. The \
            directory and the tree are created if they do not exist. The put is durable before \
            the close begins (it is in the synced write-ahead log): a crash during the close \
            keeps it.",
        after_long_help = put_after())]
    Put(PutCmd),
    /// Print the value of a key (or write it to a file: --output)
    #[command(
        long_about = "Print the value of KEY in tree TREE, followed by a newline; or, with \
            --output PATH, write its raw bytes to PATH.",
        after_long_help = get_after())]
    Get(GetCmd),
    /// Remove a key
    #[command(
        long_about = "Remove KEY from tree TREE. The removal is durable before the data \
            directory is closed (it is in the synced write-ahead log): a crash during the \
            close keeps it.",
        after_long_help = del_after())]
    Del(KeyCmd),
    /// Print the entries of a key range
    #[command(
        long_about = "Print the entries of tree TREE whose keys lie in the range [FROM, TO), \
            in key order, one line per entry: KEY, a tab, VALUE.",
        after_long_help = scan_after())]
    Scan(ScanCmd),
    /// Print every entry of every tree (or one) as lines of text, for `load`
    #[command(
        long_about = "Print every entry of every tree (or of tree TREE) on standard output, \
            tree after tree in name order and each in key order, in the dump format below: \
            text a person can read and grep, that `ferrite load` reads back byte for byte. \
            Streamed: one entry is in memory at a time.",
        after_long_help = dump_after())]
    Dump(DumpCmd),
    /// Load entries from standard input: a dump, or KEY<TAB>VALUE lines
    #[command(
        long_about = "Load the entries of standard input into the data directory (created if \
            missing), in large batches: a dump made by `ferrite dump` (its trees are created \
            as needed; --tree loads only that one), or plain KEY<TAB>VALUE lines, escaped as \
            `scan` prints them (or hex with --hex), into the tree --tree names. A key that \
            exists gets the loaded value. Sorted input loads fastest.",
        after_long_help = load_after())]
    Load(LoadCmd),
    /// Copy a data directory to a new one, consistent and checked
    #[command(
        long_about = "Copy the data directory DIR into the new directory TARGET (--to): its \
            page file and the log after its last checkpoint, as one consistent state, synced, \
            then checked as `ferrite check` does. Readers may use DIR meanwhile; a writer \
            cannot open it until the copy is done (nor can this command start while a writer \
            holds it: it waits 5 s, then names the holder).",
        after_long_help = BACKUP_AFTER)]
    Backup(BackupCmd),
    /// Rewrite a data directory into full pages and give the rest back to the file system
    #[command(
        long_about = "Rewrite every entry of DIR, in key order, into a fresh directory beside \
            it (full leaves, no free pages), check it, and swap it in with one atomic rename: \
            the space that deletes and half-full pages held goes back to the file system. \
            Needs room for the compacted copy while it runs.",
        after_long_help = COMPACT_AFTER)]
    Compact(CompactCmd),
    /// Write bytes into a value at an offset (creates the key if needed)
    #[command(
        name = "write-at",
        long_about = "Write VALUE, or the bytes of file PATH (--value-file), into the value of \
            KEY in tree TREE from byte N (--offset) on, then close the data directory cleanly. \
            The bytes around the range are kept; a value that ends before the range ends grows \
            to its end (a gap before N reads as zeros). The directory, the tree and the key are \
            created if they do not exist (a new key's value is N zero bytes, then the bytes \
            written).",
        after_long_help = write_at_after())]
    WriteAt(WriteAtCmd),
    /// Print a range of a value's bytes, raw
    #[command(
        name = "read-at",
        long_about = "Write the bytes of the value of KEY in tree TREE from byte N (--offset) \
            on, at most --length bytes (fewer where the value ends first), raw on standard \
            output or into file PATH (--output).",
        after_long_help = read_at_after())]
    ReadAt(ReadAtCmd),
    /// Print a value's size and how it is stored
    #[command(
        long_about = "Print the size of the value of KEY in tree TREE and how it is stored: \
            inline (a small value, in its leaf or a value page) or as an object, with its \
            extents (runs of whole 4 KiB pages) and fragments (small or unaligned writes not \
            merged into whole pages yet).",
        after_long_help = stat_after())]
    Stat(KeyCmd),
    /// List, create or drop trees
    #[command(
        long_about = "List the trees of a data directory, one name per line in name order; or \
            create or drop one.",
        after_long_help = TREES_AFTER)]
    Trees(TreesCmd),
    /// Print file, pool and per-tree numbers
    #[command(
        long_about = "Print the numbers of a data directory: its page file (pages in use, free \
            pages, size on disk), its buffer pool, and per tree the keys, pages and depth.",
        after_long_help = STATS_AFTER)]
    Stats(StatsCmd),
    /// Verify every page and tree, and the write-ahead log; report every fault
    #[command(
        long_about = "Verify a data directory: every page's checksum and identity, every \
            tree's structure (key order, fences, depth), the page accounting (each page used \
            once or free, none lost), and the write-ahead log. Prints what was checked, per \
            tree and in total, and every fault found.",
        after_long_help = CHECK_AFTER)]
    Check(CheckCmd),
    /// Run a benchmark workload (lookup, fill, ycsb-a .. ycsb-f, compare, io, recovery)
    #[command(
        long_about = "Run a benchmark workload against Ferrite, or a comparison workload on \
            Ferrite, RocksDB, WiredTiger or LMDB. Every workload prints a human-readable \
            summary and ends with one line `result name=value ...` of plain numbers, for \
            scripts.",
        after_long_help = BENCH_AFTER)]
    Bench(BenchCmd),
    /// Serve memcached's text and meta protocols from a data directory
    #[command(
        long_about = "Serve memcached's text and meta protocols on TCP from data directory DIR \
            (made if missing): a drop-in memcached whose items live in Ferrite, on disk, and \
            survive a restart. Each worker serves its connections and their disk I/O from its \
            own io_uring. Prints `listening on ADDR:PORT` once it accepts connections; \
            SIGTERM or SIGINT stops it cleanly (connections closed, every item written back).",
        after_long_help = SERVE_AFTER)]
    Serve(ServeCmd),
    /// Print a shell completion script on stdout
    #[command(
        long_about = "Print the completion script of SHELL on stdout, to be sourced by the \
            shell.",
        after_long_help = "\
EXAMPLES
    ferrite completions bash > ~/.local/share/bash-completion/completions/ferrite
    ferrite completions zsh > ~/.zfunc/_ferrite
    ferrite completions fish > ~/.config/fish/completions/ferrite.fish"
    )]
    Completions(CompletionsCmd),
    /// Print the version
    Version,
}

fn put_after() -> String {
    with_limits(concat!(
        "\
KEYS AND VALUES
    Keys (1 to MAX_KEY_LEN bytes) and values (0 to MAX_OBJECT_LEN bytes, 1 TiB) are
    given and printed as text: an argument's bytes are taken as they are. With --hex they
    are given and printed in hexadecimal instead (two digits a byte, either case,
    optional 0x prefix), for binary data. Put `--` before a KEY or VALUE that begins
    with '-'.

VALUE FILES
    --value-file PATH takes the value from file PATH instead (`-`: standard input),
    byte for byte (--hex is then for KEY only), and streams it into the tree, never held
    in memory whole: for a value longer than one argument may be (128 KiB on Linux), or
    one that is not at hand as text. It is one put all the same: until it is made a
    reader sees the old value, and a file that cannot be read (or ends in an error)
    leaves the old value in place.

EXIT STATUS
    0 when the put was made, 2 when it failed (a --value-file that cannot be read
    included: the message names it).
",
        "    If only closing the data directory fails afterwards (a full disk, say), the change
    stands: it is durable in the write-ahead log, the exit status is the change's, and a
    warning on stderr says that the next open for writing (put, write-at, del, trees
    --create or --drop) applies it.

EXAMPLES
    ferrite put --db data --tree fruit apple red
    ferrite put --db data --tree fruit --hex 00ff 0102
    ferrite put --db data --tree fruit -- -dash value
    ferrite put --db data --tree files photo --value-file photo.jpg
    tar c docs | ferrite put --db data --tree files docs.tar --value-file -"
    ))
}

fn get_after() -> String {
    with_limits(
        "\
OUTPUT
    The value's bytes as they are when it is UTF-8 text. A value that is not UTF-8 is
    printed with each invalid byte as \\xNN (and each backslash as \\\\), with a note on
    stderr; use --hex for the exact bytes.

    With --output PATH the value's raw bytes go to file PATH (`-`: standard output)
    instead, streamed, whatever their size: no newline added, nothing escaped, whatever
    --hex says (--hex is then for KEY only).

KEYS AND VALUES
    Keys (1 to MAX_KEY_LEN bytes) and values (0 to MAX_OBJECT_LEN bytes, 1 TiB) are
    given and printed as text: an argument's bytes are taken as they are. With --hex they
    are given and printed in hexadecimal instead (two digits a byte, either case,
    optional 0x prefix), for binary data. Put `--` before a KEY or VALUE that begins
    with '-'.

EXIT STATUS
    0 when the key was found, 1 when it is absent (nothing is printed on stdout), 2 on
    an error (including a tree that does not exist).
    This command never creates a data directory: pointed at a directory that is
    not one, it says so and exits with status 2.

EXAMPLES
    ferrite get --db data --tree fruit apple
    ferrite get --db data --tree fruit --hex 00ff
    ferrite get --db data --tree files photo --output copy.jpg
    ferrite get --db data --tree files docs.tar --output - | tar t",
    )
}

fn write_at_after() -> String {
    with_limits(
        "\
BYTES
    VALUE is given as text (the argument's bytes as they are), or in hexadecimal with
    --hex. --value-file PATH takes the bytes from file PATH instead (`-`: standard
    input), byte for byte (--hex is then for KEY only). Keys are 1 to MAX_KEY_LEN bytes;
    a value grows up to MAX_OBJECT_LEN bytes (1 TiB). --offset takes a number of bytes,
    with an optional binary unit: 4096, 4k (4096), 1m, 2g, 64KiB.

PIECES
    The bytes are read and written in pieces of at most 8 MiB, each one write at the
    offset where the last ended and each durable (in the synced write-ahead log) when
    made: a big file never sits in memory whole, but the write as a whole is not one
    change. If it fails part-way (a file that cannot be read on, a full disk) the pieces
    before stay written, and the message says how many bytes from --offset were. Use put
    --value-file to replace a whole value in one change.

EXIT STATUS
    0 when the bytes were written, 2 when it failed (a --value-file that cannot be read
    included: the message names it).
    If only closing the data directory fails afterwards (a full disk, say), the change
    stands: it is durable in the write-ahead log, the exit status is the change's, and a
    warning on stderr says that the next open for writing (put, write-at, del, trees
    --create or --drop) applies it.

EXAMPLES
    ferrite write-at --db data --tree files log --offset 0 'first line'
    ferrite write-at --db data --tree files disk.img --offset 1m --value-file block.bin
    ferrite write-at --db data --tree files --hex 6b --offset 4097 00ff",
    )
}

fn read_at_after() -> String {
    with_limits(
        "\
OUTPUT
    The bytes of the range, raw (no newline added, nothing escaped), read and written
    in pieces of at most 8 MiB. Where the value ends before the range does, the bytes up
    to its end are written and a note on stderr says how many; a range that starts at or
    past the end writes nothing. --offset and --length take a number of bytes, with an
    optional binary unit: 4096, 4k (4096), 1m, 2g, 64KiB.

EXIT STATUS
    0 when the key was found (even if the range held no bytes), 1 when it is absent
    (nothing is written), 2 on an error (including a tree that does not exist).
    This command never creates a data directory: pointed at a directory that is
    not one, it says so and exits with status 2.

EXAMPLES
    ferrite read-at --db data --tree files disk.img --offset 1m --length 4k > block.bin
    ferrite read-at --db data --tree files log --offset 0 --length 100 --output head.txt",
    )
}

fn stat_after() -> String {
    with_limits(
        "\
OUTPUT
    A block for people: the size in bytes and in binary units, how the value is stored
    (inline, or as an object), its extents and the pages they hold, its fragments and
    the bytes they hold (an inline value has none of either). The last line is, for
    scripts:

    result key=KEY size=N inline=true|false extents=N extent_pages=N fragments=N
           fragment_bytes=N

    (on one line; KEY as in scan's output: escaped text, or hex with --hex).

EXIT STATUS
    0 when the key was found, 1 when it is absent (nothing is printed on stdout), 2 on
    an error (including a tree that does not exist).
    This command never creates a data directory: pointed at a directory that is
    not one, it says so and exits with status 2.

EXAMPLES
    ferrite stat --db data --tree files disk.img",
    )
}

fn del_after() -> String {
    with_limits(
        "\
KEYS AND VALUES
    Keys (1 to MAX_KEY_LEN bytes) and values (0 to MAX_VALUE_LEN bytes) are given and
    printed as text: an argument's bytes are taken as they are. With --hex they are given
    and printed in hexadecimal instead (two digits a byte, either case, optional 0x
    prefix), for binary data. Put `--` before a KEY or VALUE that begins with '-'.

EXIT STATUS
    0 when the key was removed, 1 when it was absent, 2 on an error (including a tree or
    data directory that does not exist: del creates neither).
    If only closing the data directory fails afterwards (a full disk, say), the change
    stands: it is durable in the write-ahead log, the exit status is the change's, and a
    warning on stderr says that the next open for writing (put, write-at, del, trees
    --create or --drop) applies it.

EXAMPLES
    ferrite del --db data --tree fruit apple",
    )
}

fn scan_after() -> String {
    with_limits(
        "\
OUTPUT
    One line per entry. As text, every key and value is escaped so that an entry stays on
    one line: \\\\ for a backslash, \\t, \\n, \\r, \\xNN for other control characters and
    for bytes that are not UTF-8. Use --hex for exact bytes.

KEYS AND VALUES
    Keys (1 to MAX_KEY_LEN bytes) and values (0 to MAX_VALUE_LEN bytes) are given and
    printed as text: an argument's bytes are taken as they are. With --hex they are given
    and printed in hexadecimal instead (two digits a byte, either case, optional 0x
    prefix), for binary data.

NOTES
    This command never creates a data directory: pointed at a directory that is
    not one, it says so and exits with status 2.

EXAMPLES
    ferrite scan --db data --tree fruit
    ferrite scan --db data --tree fruit --from b --to d
    ferrite scan --db data --tree fruit --reverse --limit 10",
    )
}

fn dump_after() -> String {
    with_limits(
        "\
FORMAT
    Lines of text, each ending in a newline:
        # ferrite dump 1 text        the header: format version 1; text or hex fields
        # tree orders                the entries that follow are tree \"orders\"'s
        order-0001<TAB>two apples    KEY, a tab, VALUE (in key order within a tree)
        # tree users
        \\x23admin<TAB>...             a key starting with # has that byte escaped
        # end trees=2 entries=2      the last line: a dump cut short lacks it
    As text, keys and values are escaped as scan prints them: \\\\ for a backslash, \\t,
    \\n, \\r, \\xNN for other control characters and for bytes that are not UTF-8, and
    \\u{X} for other control characters beyond ASCII; all other bytes are themselves. With
    --hex, keys and values are lower-case hexadecimal. Tree names are always escaped text.
    Values of any size are dumped whole on their line (each in memory while it is
    written).

NOTES
    The dump reads the directory as one consistent state: it shares it with other readers,
    never with a writer. This command never creates a data directory: pointed at a
    directory that is not one, it says so and exits with status 2.

EXAMPLES
    ferrite dump --db data > data.dump
    ferrite dump --db data --tree users --hex | gzip > users.dump.gz
    ferrite dump --db old | ferrite load --db new",
    )
}

const BACKUP_AFTER: &str = "\
NOTES
    The copy holds what DIR held when the command opened it, changes made by no one
    meanwhile: DIR is held read-only throughout, so no writer (ferrite put, ferrite serve,
    a program on the library) can open it until the copy is checked. A program that has
    DIR open for writing makes this command wait 5 s, then fail naming its pid: stop it,
    or back up from it through the library. A directory whose pages live on other devices
    (Options::devices) is refused. On any error (a full disk, say) TARGET is removed; DIR
    is never changed.

EXIT STATUS
    0 once the copy is synced and checks clean; 2 on any error.

EXAMPLES
    ferrite backup --db data --to /backups/data-2026-11-28";

const COMPACT_AFTER: &str = "\
NOTES
    The compacted copy is built in .NAME.compacting-PID beside DIR, on the same file
    system, and swapped with DIR by renameat2(RENAME_EXCHANGE): a crash leaves DIR whole,
    old or new, and perhaps that directory beside it (the other one), to delete. DIR is
    held read-only meanwhile: readers may use it, writers wait. On any error (a full disk,
    say) the copy is removed and DIR is unchanged. Values are copied whole (each in memory
    while it is written).

EXIT STATUS
    0 once the compacted directory is in place; 2 on any error.

EXAMPLES
    ferrite compact --db data";

fn load_after() -> String {
    with_limits(
        "\
INPUT
    A dump (see ferrite dump --help): its header names the encoding; its trees are created
    if they do not exist; with --tree only that tree's entries are loaded. The `# end` line
    is checked against what was read: a dump cut short or damaged is an error. Or plain
    lines, KEY<TAB>VALUE each, escaped as scan prints them (hex with --hex), loaded into
    the tree --tree names: the output of `ferrite scan`, or of another tool.

LOADING
    Entries are committed in batches of up to 8 MiB (and at most a quarter of the pool's
    pages of entries: a larger --pool-mib makes larger batches); the last batch is synced,
    which makes every batch durable. Progress goes to stderr: a bar when standard input
    is a file, a line a second when it is a pipe; then a summary line.

EXIT STATUS
    0 once every entry is loaded and durable. 2 on any error: a malformed line (the error
    names its number), a dump cut short, a full disk. The entries of the batches committed
    before the error stay loaded and are made durable; the error says how many.

EXAMPLES
    ferrite load --db data < data.dump
    ferrite scan --db old --tree t | ferrite load --db new --tree t
    printf 'k1\\tv1\\nk2\\tv2\\n' | ferrite load --db data --tree t",
    )
}

const TREES_AFTER: &str = "\
NOTES
    Listing never creates a data directory. Names are escaped like scan's text output.
    --create and --drop are durable once made (in the synced write-ahead log).

EXIT STATUS
    0 when the trees were listed or the tree created or dropped, 2 on an error.
    If only closing the data directory fails afterwards (a full disk, say), the change
    stands: it is durable in the write-ahead log, the exit status is the change's, and a
    warning on stderr says that the next open for writing (put, write-at, del, trees
    --create or --drop) applies it.

EXAMPLES
    ferrite trees --db data
    ferrite trees --db data --create fruit
    ferrite trees --db data --drop fruit";

const STATS_AFTER: &str = "\
JSON
    With --json, the same numbers as one JSON object, counts and bytes as integers:

    directory        the data directory, as given
    page_file        {bytes, pages}: the page file on disk, in 4 KiB pages
    pages            {allocated, allocated_bytes, free}: pages allocated (superblocks
                     included), and how many of them are free
    pool             {bytes, pages, resident_pages, direct_io}: the buffer pool
    tree_count       the trees
    trees            one object per row of the table, in its order: {name, keys, buffered,
                     depth, inner_pages, leaf_pages, value_pages, fault_count}; name as it
                     is (JSON escapes it), Ferrite's own trees in parentheses (`(objects)`);
                     buffered: entries waiting in the change buffer, not in keys yet
    fault_count      faults found while counting (run check), lost pages apart
    lost_page_count  pages neither in use nor free (lost)

    With --quick, trees, fault_count and lost_page_count are null.

    With --server, one object of the server's counters as it named them (`tier_hits`,
    `cmd_get`, ...), numbers as numbers, plus `server` (ADDR as given).

A RUNNING SERVER
    A directory `ferrite serve` is serving is locked by it, and its second cache tier's
    counters live in its process: --server ADDR asks the server itself (its memcached
    `stats` command) and prints its connections, commands, and tier use: hits of lookups,
    pages copied in and the bytes written, copies dropped as their pages changed and
    pushed out, pages refused, the overhead-bypass ratio (OBP) over the server's life and
    over its worst window, and the windows over the admission's limit.

NOTES
    The per-tree numbers are counted by walking every page of every tree, as check does,
    so on a large data set they take as long as a check; --quick prints only the numbers
    known without reading the trees.
    This command never creates a data directory: pointed at a directory that is
    not one, it says so and exits with status 2.

EXAMPLES
    ferrite stats --db data
    ferrite stats --db data --quick
    ferrite stats --db data --json
    ferrite stats --server 127.0.0.1:11211";

const CHECK_AFTER: &str = "\
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
    before them.

JSON
    With --json, the same as one JSON object, counts, bytes and positions as integers:

    directory        the data directory, as given
    ok               true when no fault was found (the exit status is 0)
    closed_cleanly   false when it was not: it is checked as recovered in memory (NOTES)
    catalog          the catalog's row of the table: {keys, buffered, depth, inner_pages,
                     leaf_pages, value_pages, fault_count}
    trees            the other rows, in order, the same with a name: {name, keys, ...};
                     name as it is (JSON escapes it), Ferrite's own trees in parentheses
                     (`(objects)`); buffered: entries waiting in the change buffer, not in
                     keys yet
    pages            {allocated, allocated_bytes, free} (superblocks included)
    objects          {objects, extents, extent_pages, extent_bytes, blocks_with_fragments}
    log              {state: \"none\"} without a checkpoint; {state: \"damaged\", fault};
                     or {state: \"intact\", directory, segments, unused_files,
                     checkpoint_position, replay_position, end_position, records, commits,
                     page_images, checkpoint_buffered_puts, buffered_changes, torn_bytes,
                     replayed_in_memory}
    fault_count      the faults, lost pages apart
    lost_page_count  the pages neither in use nor free (lost)
    faults           the `fault:` lines, as strings, without `fault: `
    lost_page_ranges every lost page, as ranges [first, last]

    When the log is damaged, the pages are not checked: closed_cleanly, catalog, trees,
    pages and objects are null. Errors are not JSON: they go to stderr, exit status 2.

NOTES
    A directory that was not closed cleanly (a crash, a killed process) is checked as
    recovered: its log is replayed into memory and the pages checked as recovery leaves
    them; nothing on disk changes (a command that opens it for writing, put or del,
    recovers it on disk). Both superblock copies are read: a damaged one is a fault until
    the next write replaces it.

EXIT STATUS
    0 when no fault was found, 1 when faults were found (in the pages or the log), 2 when
    the data could not be checked at all (for example a corrupt page on the way to the
    trees: the error says which page).
    This command never creates a data directory: pointed at a directory that is
    not one, it says so and exits with status 2.

EXAMPLES
    ferrite check --db data
    ferrite check --db data --json";

/// The options every data command takes.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct DbArgs {
    /// The data directory (required)
    #[arg(long = "db", value_name = "DIR",
          value_parser = OsStringValueParser::new().try_map(value::path))]
    pub dir: PathBuf,
    /// Buffer pool size in MiB (at least 1)
    #[arg(long, value_name = "M", default_value_t = DEFAULT_POOL_MIB,
          value_parser = |s: &str| value::whole(s, 1, MAX_POOL_MIB))]
    pub pool_mib: u64,
    /// Buffered I/O instead of O_DIRECT
    #[arg(
        long_help = "Buffered I/O instead of O_DIRECT (for file systems that refuse O_DIRECT, \
            such as tmpfs).",
        long = "no-direct", action = ArgAction::SetFalse)]
    pub direct_io: bool,
}

/// `ferrite put`.
#[derive(Debug, Args)]
pub struct PutCmd {
    /// The tree (created if it does not exist)
    #[arg(long, value_name = "TREE")]
    tree: String,
    /// KEY and VALUE are hexadecimal
    #[arg(long)]
    hex: bool,
    #[command(flatten)]
    db: DbArgs,
    /// The value is the bytes of PATH (`-`: standard input), streamed
    #[arg(
        long_help = "The value is the bytes of file PATH (`-`: standard input), read as they are \
            (--hex is for KEY only) and streamed into the tree, never held in memory whole, as \
            one put: a reader sees the old value or the whole new one. Instead of VALUE.",
        long, value_name = "PATH",
        value_parser = OsStringValueParser::new().try_map(value::file_arg))]
    value_file: Option<FileArg>,
    /// The key (text, or hex with --hex; `--` before one that begins with '-')
    #[arg(value_name = "KEY", value_parser = OsStringValueParser::new())]
    key: OsString,
    /// The value (text, or hex with --hex); or --value-file PATH
    #[arg(value_name = "VALUE", value_parser = OsStringValueParser::new(),
          conflicts_with = "value_file")]
    value: Option<OsString>,
}

/// `ferrite get`.
#[derive(Debug, Args)]
pub struct GetCmd {
    /// The tree
    #[arg(long, value_name = "TREE")]
    tree: String,
    /// KEY is given (and the value printed) in hexadecimal
    #[arg(long)]
    hex: bool,
    /// Write the value's raw bytes to PATH (`-`: standard output), streamed
    #[arg(
        long_help = "Write the value's raw bytes to file PATH (`-`: standard output), streamed \
            (never held in memory whole): no newline added, nothing escaped, whatever --hex \
            says (--hex is then for KEY only). PATH is created if needed, and what it held is \
            replaced once the key is found: an absent key leaves it as it was, and a PATH \
            this command created is removed again unless the get succeeds.",
        long, value_name = "PATH",
        value_parser = OsStringValueParser::new().try_map(value::file_arg))]
    output: Option<FileArg>,
    #[command(flatten)]
    db: DbArgs,
    /// The key (text, or hex with --hex; `--` before one that begins with '-')
    #[arg(value_name = "KEY", value_parser = OsStringValueParser::new())]
    key: OsString,
}

/// `ferrite del` and `ferrite stat`.
#[derive(Debug, Args)]
pub struct KeyCmd {
    /// The tree
    #[arg(long, value_name = "TREE")]
    tree: String,
    /// KEY is given (and printed) in hexadecimal
    #[arg(long)]
    hex: bool,
    #[command(flatten)]
    db: DbArgs,
    /// The key (text, or hex with --hex; `--` before one that begins with '-')
    #[arg(value_name = "KEY", value_parser = OsStringValueParser::new())]
    key: OsString,
}

/// `ferrite write-at`.
#[derive(Debug, Args)]
pub struct WriteAtCmd {
    /// The tree (created if it does not exist)
    #[arg(long, value_name = "TREE")]
    tree: String,
    /// KEY and VALUE are hexadecimal
    #[arg(long)]
    hex: bool,
    /// Where the bytes go in the value: byte N (4096, 4k, 1m: 1k = 1024)
    #[arg(long, value_name = "N", value_parser = value::object_bytes)]
    offset: u64,
    /// The bytes are those of PATH (`-`: standard input), in pieces of at most 8 MiB
    #[arg(
        long_help = "The bytes to write are those of file PATH (`-`: standard input), read as \
            they are (--hex is for KEY only) in pieces of at most 8 MiB, each written (and \
            committed) at the offset that follows the last. Instead of VALUE.",
        long, value_name = "PATH",
        value_parser = OsStringValueParser::new().try_map(value::file_arg))]
    value_file: Option<FileArg>,
    #[command(flatten)]
    db: DbArgs,
    /// The key (text, or hex with --hex; `--` before one that begins with '-')
    #[arg(value_name = "KEY", value_parser = OsStringValueParser::new())]
    key: OsString,
    /// The bytes to write (text, or hex with --hex); or --value-file PATH
    #[arg(value_name = "VALUE", value_parser = OsStringValueParser::new(),
          conflicts_with = "value_file")]
    value: Option<OsString>,
}

/// `ferrite read-at`.
#[derive(Debug, Args)]
pub struct ReadAtCmd {
    /// The tree
    #[arg(long, value_name = "TREE")]
    tree: String,
    /// KEY is hexadecimal (the bytes read are written raw all the same)
    #[arg(long)]
    hex: bool,
    /// The range starts at byte N of the value (4096, 4k, 1m: 1k = 1024)
    #[arg(long, value_name = "N", value_parser = value::object_bytes)]
    offset: u64,
    /// The range is N bytes long, or less where the value ends first
    #[arg(long, value_name = "N", value_parser = value::object_bytes)]
    length: u64,
    /// Write the bytes to PATH instead of standard output
    #[arg(
        long_help = "Write the bytes read to file PATH instead of standard output (`-` is \
            standard output). PATH is created if needed, and what it held is replaced once \
            the key is found: an absent key leaves it as it was, and a PATH this command \
            created is removed again unless the read succeeds.",
        long, value_name = "PATH",
        value_parser = OsStringValueParser::new().try_map(value::file_arg))]
    output: Option<FileArg>,
    #[command(flatten)]
    db: DbArgs,
    /// The key (text, or hex with --hex; `--` before one that begins with '-')
    #[arg(value_name = "KEY", value_parser = OsStringValueParser::new())]
    key: OsString,
}

/// `ferrite dump`.
#[derive(Debug, Args)]
pub struct DumpCmd {
    /// Dump only this tree (default: every tree)
    #[arg(long, value_name = "TREE")]
    tree: Option<String>,
    /// Keys and values in hexadecimal instead of escaped text
    #[arg(long)]
    hex: bool,
    #[command(flatten)]
    db: DbArgs,
}

/// `ferrite load`.
#[derive(Debug, Args)]
pub struct LoadCmd {
    /// Load only this tree of a dump; for plain lines, the tree they go into
    #[arg(long, value_name = "TREE")]
    tree: Option<String>,
    /// Plain lines (no dump header) are in hexadecimal
    #[arg(long)]
    hex: bool,
    #[command(flatten)]
    db: DbArgs,
}

/// `ferrite backup`.
#[derive(Debug, Args)]
pub struct BackupCmd {
    #[command(flatten)]
    db: DbArgs,
    /// The new directory to copy into (must not exist, or be empty)
    #[arg(long = "to", value_name = "TARGET",
          value_parser = OsStringValueParser::new().try_map(value::path))]
    to: PathBuf,
}

/// `ferrite compact`.
#[derive(Debug, Args)]
pub struct CompactCmd {
    /// A tree that must exist (every tree is rewritten: they share the page file)
    #[arg(long, value_name = "TREE")]
    tree: Option<String>,
    #[command(flatten)]
    db: DbArgs,
}

/// `ferrite scan`.
#[derive(Debug, Args)]
pub struct ScanCmd {
    /// The tree
    #[arg(long, value_name = "TREE")]
    tree: String,
    /// The range starts at KEY, inclusive (default: the first key)
    #[arg(long, value_name = "KEY", allow_hyphen_values = true,
          value_parser = OsStringValueParser::new())]
    from: Option<OsString>,
    /// The range ends before KEY, exclusive (default: after the last key)
    #[arg(long, value_name = "KEY", allow_hyphen_values = true,
          value_parser = OsStringValueParser::new())]
    to: Option<OsString>,
    /// Print at most N entries (default: all)
    #[arg(long, value_name = "N", value_parser = |s: &str| value::whole(s, 0, u64::MAX))]
    limit: Option<u64>,
    /// Walk the same range backwards
    #[arg(
        long_help = "Walk the same range backwards: from the last key below TO down to FROM; \
            with --limit, the N largest keys of the range.",
        long
    )]
    reverse: bool,
    /// FROM and TO are given, and keys and values printed, in hexadecimal
    #[arg(long)]
    hex: bool,
    #[command(flatten)]
    db: DbArgs,
}

/// `ferrite trees`.
#[derive(Debug, Args)]
pub struct TreesCmd {
    /// Create tree NAME
    #[arg(
        long_help = "Create tree NAME (an error if it exists); creates the data directory if \
            it does not exist.",
        long,
        value_name = "NAME",
        conflicts_with = "drop"
    )]
    create: Option<String>,
    /// Drop tree NAME and free its pages (an error if it does not exist)
    #[arg(long, value_name = "NAME")]
    drop: Option<String>,
    #[command(flatten)]
    db: DbArgs,
}

/// `ferrite stats`.
#[derive(Debug, Args)]
pub struct StatsCmd {
    /// Skip the per-tree numbers
    #[arg(long)]
    quick: bool,
    /// Print one JSON object instead of the text
    #[arg(
        long_help = "Print the same numbers as one JSON object (see JSON below) instead of \
            the text: bytes and counts as plain integers, tree names unescaped.",
        long
    )]
    json: bool,
    /// Ask the `ferrite serve` listening at ADDR for its live counters instead
    #[arg(
        long_help = "Ask the `ferrite serve` listening at ADDR (HOST:PORT) for its live \
            counters instead of opening a directory: connections, commands, and the second \
            cache tier's use (hits, misses, copies, drops, OBP, bytes written). A served \
            directory is locked by its server, and the tier's counters live in the server's \
            process: this is how to see them.",
        long,
        value_name = "ADDR",
        conflicts_with_all = ["dir", "quick"],
        required_unless_present = "dir"
    )]
    server: Option<String>,
    #[command(flatten)]
    db: Option<DbArgs>,
}

/// `ferrite check`.
#[derive(Debug, Args)]
pub struct CheckCmd {
    /// Print one JSON object instead of the text
    #[arg(
        long_help = "Print what was checked and every fault as one JSON object (see JSON \
            below) instead of the text; the exit status is the same.",
        long
    )]
    json: bool,
    #[command(flatten)]
    db: DbArgs,
}

/// `ferrite bench serve`.
#[derive(Debug, Args)]
pub struct ServeBenchCmd {
    /// ferrite (default) or memcached
    #[arg(long, value_name = "STORE", value_parser = ServeStore::parse)]
    store: Option<ServeStore>,
    /// A server already running (else the run starts the store)
    #[arg(long, value_name = "ADDR:PORT", value_parser = value::socket_addr)]
    server: Option<std::net::SocketAddr>,
    /// Where a store the run starts keeps its data (default ferrite-data/bench-serve-STORE)
    #[arg(long = "db", value_name = "DIR",
          value_parser = OsStringValueParser::new().try_map(value::path))]
    dir: Option<PathBuf>,
    /// The store's memory, MiB (default 256)
    #[arg(long, value_name = "M", value_parser = |s: &str| value::whole(s, 16, MAX_POOL_MIB))]
    memory_mib: Option<u64>,
    /// The store's disk, MiB: Ferrite's page file, memcached's extstore file (default: 1.5x
    /// the data, at least 256 MiB, for memcached; unbounded for Ferrite)
    #[arg(long, value_name = "N", value_parser = |s: &str| value::whole(s, 16, 1 << 30))]
    disk_budget_mib: Option<u64>,
    /// Items loaded (default 1M)
    #[arg(long, value_name = "N", value_parser = |s: &str| value::count(s, 1, 1 << 32))]
    keys: Option<u64>,
    /// Bytes per value (default 1024)
    #[arg(long, value_name = "B", value_parser = |s: &str| value::whole(s, 16, 1 << 30))]
    value_size: Option<u64>,
    /// GET:SET percentages (default 90:10)
    #[arg(long, value_name = "GET:SET", value_parser = serve_bench::parse_mix)]
    mix: Option<u32>,
    /// uniform (default) or zipfian
    #[arg(long, value_name = "DIST", value_parser = value::distribution)]
    distribution: Option<Distribution>,
    /// Open loop: offer OPS operations/s in all (default: closed loop)
    #[arg(long, value_name = "OPS", value_parser = value::rate)]
    rate: Option<f64>,
    /// Connections (default 32)
    #[arg(long, value_name = "C", value_parser = |s: &str| value::whole_usize(s, 1, 4096))]
    connections: Option<usize>,
    /// Measured time (default 20)
    #[arg(long, value_name = "S", value_parser = value::seconds)]
    seconds: Option<f64>,
    /// Seed of the key draws (default 1)
    #[arg(long, value_name = "X", value_parser = value::seed)]
    seed: Option<u64>,
    /// Append the result as one JSON object to FILE
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Ferrite's durability: sync (default), periodic or none (memcached has none)
    #[arg(long, value_name = "MODE", value_parser = ["sync", "periodic", "none"])]
    durability: Option<String>,
    /// The measured part's client: threads (default: one blocking thread per connection) or
    /// ring (one thread, one io_uring for all: less CPU, but one thread's delays delay them all)
    #[arg(long, value_name = "CLIENT", value_parser = serve_bench::Client::parse)]
    client: Option<serve_bench::Client>,
    /// Keys per GET request (`get k1 k2 …`; default 1); ops then count requests
    #[arg(long, value_name = "N",
          value_parser = |s: &str| value::whole_usize(s, 1, serve_bench::MULTIGET_MAX))]
    multiget: Option<usize>,
    /// Herds instead of the mix: each round, every connection GETs one key not read before,
    /// all at once (GETs only; closed rounds, no --rate)
    #[arg(long)]
    herd: bool,
    /// The zipfian constant of --distribution zipfian (default 0.99)
    #[arg(long, value_name = "X", value_parser = value::theta)]
    theta: Option<f64>,
    #[command(flatten)]
    tier: TierArgs,
}

const SERVE_BENCH_AFTER: &str = "\
OUTPUT
    A summary, then one line:

    result store=S workload=serve mix=G:S ops_per_s=N p50_us=L p99_us=L hit_ratio=X
           p999_us=L max_us=L keys=N value_size=B distribution=D connections=C
           memory_mib=M durability=D rate=OPS|closed ops=N gets=N sets=N set_errors=N seconds=S
           load_s=S client_cpu_us_per_op=X disk_budget_mib=N|default settle_s=S
           client=threads|ring [multiget=N] [herd_rounds=N device_reads_per_herd=X]
           [server_cpu_us_per_op=X ops_per_server_core_s=N]
           [device_reads_per_get=X device_kib_per_read=X device_reads_per_op=X] [load_evictions=N] [items_after_load=N] [flash_items=N] [flash_hits=N]
           [load_rate=OPS] tier_hits=N tier_misses=N obp=X tier_write_mib=X
           obp_windows=N obp_windows_over=N theta=X

    The tier fields: Ferrite's second cache tier while measuring (--tier; zeros
    otherwise), as `ferrite bench ycsb-c --help` describes them. The bracketed fields are the server's own `stats`, where it keeps them: items it evicted
    while loading, items it held after (curr_items), items with their value on flash
    (memcached's extstore_objects_used), measured GET hits read from flash (get_extstore).
    load_rate: memcached is loaded paced (the mean rate is given): its extstore keeps each
    flushed item's header in RAM, in a slab class that grows only as fast as memcached's page
    mover, so a load at full speed evicts most items. The load runs with `slabs automove 2`
    and slows down whenever memcached evicts.
    client_cpu_us_per_op: CPU of the load generator's connection threads. server_cpu_*: of
    the server (memcached's process; Ferrite's, in this process, less the connection
    threads), not known for --server.
    settle_s: seconds waited after the load, before measuring, for the disk under --db to
    write less than 4 MiB in a second and then for a syncfs of it to take less than 20 ms
    (60 s at most: on a virtual disk the first cache flushes after a large load can stall
    for tenths of a second). device_*: that disk's reads while
    measuring, per GET (where there were GETs), their mean size, and per operation.
    set_errors: SETs refused with SERVER_ERROR out of memory (memcached's extstore refuses
    so while its flash writes lag; the load retries them, the measured part counts them).
    multiget: keys per GET request, when more than one (ops and latencies are per request;
    gets and hit_ratio per key). herd_rounds: with --herd, the rounds run, in each of which
    every connection GETs the same key, one not read before, at once; device_reads_per_herd:
    the disk's reads per round (a store that shares one read of a cold item among the herd
    reads about as many pages as one GET of it needs).
    hit_ratio: GETs that found their key over all GETs. Latencies (HdrHistogram) time each
    request from its intended send time in open loop, from its send in closed loop.

EXAMPLES
    ferrite bench serve --store ferrite --keys 2M --value-size 1024 --memory-mib 200
    ferrite bench serve --store memcached --keys 2M --value-size 1024 --memory-mib 200
    ferrite bench serve --server 127.0.0.1:11211 --mix 50:50 --rate 50000
    ferrite bench serve --store ferrite --keys 100K --value-size 100000 --herd --connections 100";

/// `ferrite serve`.
#[derive(Debug, Args)]
pub struct ServeCmd {
    /// The data directory (made if missing)
    #[arg(long = "db", value_name = "DIR",
          value_parser = OsStringValueParser::new().try_map(value::path))]
    db: PathBuf,
    /// Address and port to listen on (default 127.0.0.1:11211)
    #[arg(long, value_name = "ADDR:PORT", value_parser = value::socket_addr)]
    listen: Option<std::net::SocketAddr>,
    /// Memory for the buffer pool and everything else, MiB (default 256)
    #[arg(long, value_name = "M", value_parser = |s: &str| value::whole(s, 16, MAX_POOL_MIB))]
    memory_mib: Option<u64>,
    /// Most disk the data directory's page file may take, MiB (default: 1 TiB)
    #[arg(
        long_help = "Most disk the data directory's page file may take, MiB (default 1 TiB). \
            In cache mode, items are evicted to stay within it (from 95 % full down to 90 %); \
            in store mode, once it is full, storing answers SERVER_ERROR out of memory \
            storing object and nothing stored is lost.",
        long, value_name = "N", value_parser = |s: &str| value::whole(s, 16, 1 << 30))]
    disk_budget_mib: Option<u64>,
    /// cache (default) or store
    #[arg(
        long_help = "cache (the default) or store. A cache evicts the items read least \
            (CLOCK over the items, a read buys an item up to three passes of the hand) to stay \
            within --disk-budget-mib; a store never evicts, and once the budget is full \
            answers SERVER_ERROR out of memory storing object, losing nothing. In both, \
            expired and flushed items are removed by a sweep as writes come in.",
        long, value_name = "MODE", value_parser = ["cache", "store"])]
    mode: Option<String>,
    /// Worker threads (default: one per core)
    #[arg(long, value_name = "N", value_parser = |s: &str| value::whole_usize(s, 1, 1024))]
    workers: Option<usize>,
    /// Most connections at once (default 1024)
    #[arg(long, value_name = "N", value_parser = |s: &str| value::whole_usize(s, 1, 1 << 20))]
    max_connections: Option<usize>,
    /// Largest item, MiB (default 1, at most 1024)
    #[arg(long, value_name = "N", value_parser = |s: &str| value::whole(s, 1, 1024))]
    item_max_mib: Option<u64>,
    /// Close a connection idle this many seconds (default 0: never)
    #[arg(long, value_name = "S", value_parser = |s: &str| value::whole(s, 0, 1 << 31))]
    idle_timeout_secs: Option<u64>,
    /// memcached's authfile: lines user:password; a client first sets "user password"
    #[arg(
        long_help = "memcached's authfile (memcached -Y): one user:password per line. Every \
            connection must first send a set whose data is \"user password\" (key, flags \
            and exptime ignored); until then every command answers CLIENT_ERROR \
            unauthenticated.",
        long, value_name = "FILE",
        value_parser = OsStringValueParser::new().try_map(value::path))]
    authfile: Option<PathBuf>,
    /// sync (default), periodic or none
    #[arg(
        long_help = "When a stored item is durable: sync (the default: before the reply; \
            concurrent SETs share one log write), periodic (the log is synced every 100 ms: a \
            crash loses at most the last interval) or none (written when the log's buffer \
            fills and at shutdown).",
        long, value_name = "MODE", value_parser = ["sync", "periodic", "none"])]
    durability: Option<String>,
    /// Where `backup NAME` writes online backups (as DIR/NAME); without it, none
    #[arg(
        long_help = "Enables the command `backup NAME`: an online backup of the database \
            into DIR/NAME (as `ferrite backup` makes, while the server goes on serving), \
            answered OK once the copy is whole. NAME is 1-64 letters, digits, `.`, `_` or \
            `-`, not starting with `.`: a client names a backup, never a path. DIR is made \
            if missing, and must not be inside the data directory.",
        long, value_name = "DIR",
        value_parser = OsStringValueParser::new().try_map(value::path))]
    backup_dir: Option<PathBuf>,
    /// A second cache tier in FILE, under the pool (a file in /dev/shm, say)
    #[arg(
        long_help = "A second cache tier between the pool and the disk, in FILE (made if \
            missing; a file on a faster medium than the data: /dev/shm, CXL memory): items' \
            pages evicted from memory are kept there and read from there before the disk. \
            Emptied at every start; `stats` reports tier_hits, tier_obp and the rest.",
        long, value_name = "FILE",
        value_parser = OsStringValueParser::new().try_map(value::path))]
    tier: Option<PathBuf>,
    /// The tier's size, MiB (default: twice --memory-mib)
    #[arg(long, requires = "tier", value_name = "M",
          value_parser = |s: &str| value::whole(s, 1, 1 << 30))]
    tier_mib: Option<u64>,
    /// Which evicted pages enter the tier: obp (default), all or never
    #[arg(long, requires = "tier", value_name = "POLICY",
          value_parser = ["obp", "all", "never"])]
    tier_admission: Option<String>,
    /// Whether a page enters the tier full only if read more often than the copy it
    /// replaces: frequency (default) or off
    #[arg(long, requires = "tier", value_name = "FILTER", value_parser = ["frequency", "off"])]
    tier_filter: Option<String>,
    /// How the tier's medium is accessed: mapped (default) or block (through the rings)
    #[arg(long, requires = "tier", value_name = "MEDIUM", value_parser = ["mapped", "block"])]
    tier_medium: Option<String>,
}

/// What `ferrite serve` runs with.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeArgs {
    pub db: PathBuf,
    pub listen: std::net::SocketAddr,
    pub memory_mib: u64,
    pub disk_budget_mib: Option<u64>,
    pub store_mode: bool,
    pub workers: Option<usize>,
    pub max_connections: usize,
    pub item_max_mib: u64,
    /// 0: never.
    pub idle_timeout_secs: u64,
    pub authfile: Option<PathBuf>,
    pub durability: ferrite::Durability,
    pub backup_dir: Option<PathBuf>,
    /// A second cache tier under the pool.
    pub tier: Option<ferrite::TierOptions>,
}

const SERVE_AFTER: &str = "\
PROTOCOL
    memcached 1.6's text commands (get gets gat gats set add replace append prepend cas
    incr decr touch delete flush_all stats version verbosity quit, noreply where memcached
    takes it) and meta commands (mg ms md ma mn me), with memcached's replies and error
    strings. With --backup-dir, also `backup NAME`: an online backup into DIR/NAME, answered
    OK when whole or SERVER_ERROR and why. Keys up to 250 bytes; items up to --item-max-mib. Items live in tree
    \"memcache\" of the data directory: a restart keeps them.

OUTPUT
    `listening on ADDR:PORT` on stdout once connections are accepted (port 0 picks a free
    one), `stopped` after a clean shutdown.

EXAMPLES
    ferrite serve --db ferrite-data/cache
    ferrite serve --db /srv/ferrite --listen 0.0.0.0:11211 --memory-mib 4096 --item-max-mib 16
    ferrite serve --db /srv/ferrite --backup-dir /backups/ferrite
        then: printf 'backup nightly-1\\r\\n' | nc -q1 localhost 11211";

/// `ferrite completions`.
#[derive(Debug, Args)]
pub struct CompletionsCmd {
    /// The shell
    #[arg(value_name = "SHELL", value_parser = ["bash", "zsh", "fish"])]
    shell: String,
}

// ---------------------------------------------------------------------------------------
// bench

#[derive(Debug, Args)]
pub struct BenchCmd {
    #[command(subcommand)]
    workload: BenchWorkload,
}

const BENCH_AFTER: &str = "\
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
    objects    fio-like reads or writes into large objects on Ferrite, files, RocksDB or
               SQLite, with write and space amplification (ferrite bench objects --help)
    serve      memcached load (GET/SET mixes, open or closed loop) against ferrite serve or
               memcached with extstore (ferrite bench serve --help)
    tpcc       TPC-C: the five transactions over W warehouses on Ferrite (tasks,
               serializable) or a peer (--store rocksdb|wiredtiger), the consistency
               conditions checked after the load and the run (ferrite bench tpcc --help)

EXAMPLES
    ferrite bench lookup --db DIR --keys 4.6M --pool-mib 64 --seconds 20
    ferrite bench lookup --store rocksdb --keys 1M --pool-mib 64
    ferrite bench io --engine all --pattern randread --depth 64
    ferrite bench fill --sync --committers 64 --store ferrite
    ferrite bench ycsb-a --store ferrite --records 1M --cache-mib 64
    ferrite bench compare quick --stores ferrite --records 1M --seconds 10
    ferrite bench recovery --seconds 5,10,20
    ferrite bench tpcc --warehouses 10 --cache-mib 256 --seconds 60";

#[derive(Debug, Subcommand)]
enum BenchWorkload {
    /// Point lookups: Ferrite's lookup benchmark, or with --store PEER the comparison workload
    #[command(
        long_about = "Load N keys into tree \"bench\" (key i is the 8-byte big-endian integer \
            i, its value 120 bytes derived from i), then look up keys drawn uniformly from \
            0..N for S seconds after a warm-up of min(5, S/4) seconds, checking every value \
            read. Without --store (or with --store ferrite) this is Ferrite's lookup \
            benchmark, measured against the device's random-read ceiling; with --store \
            rocksdb|wiredtiger|lmdb it is the comparison workload `lookup` on that store \
            (ferrite bench ycsb-a --help).",
        after_long_help = lookup_after())]
    Lookup(LookupCmd),
    /// Inserts into an empty store, in random (default) or key order (--order)
    #[command(after_long_help = WORKLOAD_AFTER)]
    Fill(FillCmd),
    /// Inserts in key order (fill --order seq)
    #[command(name = "fill-seq", after_long_help = WORKLOAD_AFTER)]
    FillSeq(FillCmd),
    /// Inserts in random order (fill --order random)
    #[command(name = "fill-random", after_long_help = WORKLOAD_AFTER)]
    FillRandom(FillCmd),
    /// Durable inserts from --committers N concurrent committers (fill --sync)
    #[command(name = "fill-sync", after_long_help = WORKLOAD_AFTER)]
    FillSync(FillCmd),
    /// YCSB A: 50 % reads, 50 % updates
    #[command(name = "ycsb-a", after_long_help = WORKLOAD_AFTER)]
    YcsbA(WorkloadCmd),
    /// YCSB B: 95 % reads, 5 % updates
    #[command(name = "ycsb-b", after_long_help = WORKLOAD_AFTER)]
    YcsbB(WorkloadCmd),
    /// YCSB C: 100 % reads
    #[command(name = "ycsb-c", after_long_help = WORKLOAD_AFTER)]
    YcsbC(WorkloadCmd),
    /// YCSB D: 95 % reads of the latest keys, 5 % inserts
    #[command(name = "ycsb-d", after_long_help = WORKLOAD_AFTER)]
    YcsbD(WorkloadCmd),
    /// YCSB E: 95 % scans of 1-100 entries, 5 % inserts
    #[command(name = "ycsb-e", after_long_help = WORKLOAD_AFTER)]
    YcsbE(WorkloadCmd),
    /// YCSB F: 50 % reads, 50 % read-modify-writes
    #[command(name = "ycsb-f", after_long_help = WORKLOAD_AFTER)]
    YcsbF(WorkloadCmd),
    /// A named suite of workloads on every store built in, as tables and charts
    #[command(
        long_about = "Run a suite of workloads on every store built in (or --stores) and write \
            the tables that go into docs/benchmarks.md: workloads as rows, stores as columns, \
            the best of each row in bold, with the machine and the commit named.",
        after_long_help = COMPARE_AFTER)]
    Compare(CompareCmd),
    /// The raw device ceiling through each I/O engine, and fio
    #[command(
        long_about = "Measure the raw device: keep requests in flight through one of Ferrite's \
            I/O engines (each thread its own engine instance) and count what completes; then \
            run fio with the same parameters on the same file when fio is on PATH. The ceiling \
            every other benchmark is compared with.",
        after_long_help = IO_AFTER)]
    Io(IoCmd),
    /// fio-like I/O into large objects: Ferrite's, files, RocksDB's or SQLite's
    #[command(
        long_about = "Measure reads or writes of one block at a time into large objects, \
            after MixStore's method (fio over block images at queue depth 32): N objects of M \
            MiB are written whole first (not measured), then D threads (the queue depth) each \
            read or write one block at a block-aligned offset, over and over, for S seconds. \
            The stores: Ferrite's objects (Tree::write_at / read_at), one preallocated file \
            per object with O_DIRECT (the physical reference), RocksDB (4 KiB chunk values) \
            and SQLite (a table of BLOBs, incremental BLOB I/O).",
        after_long_help = OBJECTS_AFTER)]
    Objects(ObjectsCmd),
    /// Recovery time and the log on disk, bounded as runs get longer
    #[command(
        long_about = "Show that recovery time and the log on disk stay bounded as a run gets \
            longer. For each length S of --seconds, in a fresh database: N committers insert \
            new random keys (8 bytes, 120-byte values), each acknowledged once durable, for S \
            seconds; then the database is given up as a crash would, reopened (recovery \
            replays the log from the last checkpoint) and every acknowledged key is read back.",
        after_long_help = RECOVERY_AFTER)]
    Recovery(RecoveryCmd),
    /// memcached load against ferrite serve or memcached with extstore
    #[command(
        long_about = "Load --keys items of --value-size bytes into a memcached-compatible \
            server, then send GETs and SETs (--mix) from --connections connections for \
            --seconds: closed loop, or open loop at --rate with latency from each request's \
            intended send time. Without --server the run starts the store itself: ferrite \
            serve in this process, or memcached with extstore on a file under --db. Every value \
            read is checked.",
        after_long_help = SERVE_BENCH_AFTER)]
    Serve(ServeBenchCmd),
    /// TPC-C on Ferrite: the five transactions, consistency checked after load and run
    #[command(
        long_about = "Load a TPC-C database of W warehouses (about 100 MB each: nine tables and \
            two secondary indexes as trees), then run the five transactions in the standard \
            mix (45 % New-Order, 43 % Payment, 4 % each Order-Status, Delivery, Stock-Level) \
            from 10 terminals per warehouse, each a task on Ferrite's workers, for S seconds \
            after a warm-up of min(5, S/4) seconds. Transactions are serializable (optimistic, \
            retried on conflict; Stock-Level reads read-committed, as the specification \
            allows). The consistency conditions are checked after the load and after the run; \
            a violation fails the command.",
        after_long_help = TPCC_AFTER)]
    Tpcc(TpccCmd),
}

/// `ferrite bench lookup`: one declaration for both runners (see [`lookup_action`]). Where
/// the two used different names for the same thing the lookup benchmark's name is the
/// option and the workload's an alias: `--keys` (`--records`), `--pool-mib`
/// (`--cache-mib`).
#[derive(Debug, Args)]
pub struct LookupCmd {
    /// ferrite (this benchmark, the default) or a peer: rocksdb, wiredtiger, lmdb
    #[arg(
        long_help = "ferrite (Ferrite's lookup benchmark, the default); rocksdb, wiredtiger or \
            lmdb run the comparison workload `lookup` on that store (the peers need a build \
            with --features peers).",
        long, value_name = "STORE", value_parser = value::store)]
    store: Option<StoreKind>,
    /// The data directory
    #[arg(
        long_help = "The data directory (default ./ferrite-data/bench-lookup; with a peer, \
            ferrite-data/bench-STORE). Ferrite's must hold no trees but the benchmark's \
            (\"bench\", \"bench-meta\").",
        long = "db", value_name = "DIR",
          value_parser = OsStringValueParser::new().try_map(value::path))]
    dir: Option<PathBuf>,
    /// Keys to load (default 4.6M, also 20k, 4.6M style)
    #[arg(
        long_help = "Keys to load (default 4.6M; 20000, 20k, 4.6M style); the default makes \
            the data about 10x the default pool: an entry takes 138 bytes (8-byte key, \
            120-byte value, 10-byte slot) and the key-order load fills leaves, so 4.6 M keys \
            take ~650 MiB (the summary shows the size). --records N is the same.",
        long, value_name = "N", visible_alias = "records",
          value_parser = |s: &str| value::count(s, 1, u64::MAX / 2))]
    keys: Option<u64>,
    /// Buffer pool (a peer's cache) size in MiB (default 64)
    #[arg(
        long_help = "Buffer pool size in MiB (default 64, at least 1); with a peer, its cache. \
            --cache-mib M is the same.",
        long, value_name = "M", visible_alias = "cache-mib",
          value_parser = |s: &str| value::whole(s, 1, MAX_POOL_MIB))]
    pool_mib: Option<u64>,
    /// Measured time in seconds (default 20; fractions allowed)
    #[arg(long, value_name = "S", value_parser = value::seconds)]
    seconds: Option<f64>,
    /// Worker threads running lookup tasks (default: the number of cores)
    #[arg(long, value_name = "N", value_parser = |s: &str| value::whole_usize(s, 1, 1024))]
    workers: Option<usize>,
    /// Lookup tasks in flight per worker (default 64)
    #[arg(long, value_name = "N",
          value_parser = |s: &str| value::whole_usize(s, 0, u32::MAX as usize))]
    tasks: Option<usize>,
    /// How the workers issue I/O: io_uring, aio, psync or mmap (default: the best allowed)
    #[arg(
        long_help = "How the workers issue I/O: io_uring, aio, psync or mmap (see ferrite \
            bench io --help). Default: io_uring, or where the kernel refuses it (a container's \
            seccomp profile, say) AIO, else psync, with a warning; the result line's engine= \
            says which ran. An engine named here is used or the run fails. Ferrite's \
            benchmark only.",
        long, value_name = "ENGINE", value_parser = value::engine)]
    engine: Option<EngineKind>,
    /// The devices the data is striped over, in order
    #[arg(
        long_help = "The devices (files or block devices) the data is striped over, in order \
            (default: the single page file in --db). Ferrite's benchmark only.",
        long, value_name = "PATH[,PATH...]",
          value_parser = OsStringValueParser::new().try_map(value::paths))]
    // (`::std::vec::Vec`: one value that is a list, not an option given many times.)
    devices: Option<::std::vec::Vec<PathBuf>>,
    /// Look up through the blocking API from --threads threads instead of tasks on workers
    #[arg(long)]
    direct_api: bool,
    /// Lookup threads of the blocking API (default 1; a peer's threads: the cores)
    #[arg(long, value_name = "T", value_parser = |s: &str| value::whole_usize(s, 1, 4096))]
    threads: Option<usize>,
    /// Seed of the key draws (default 1; decimal or 0x hex)
    #[arg(long, value_name = "X", value_parser = value::seed)]
    seed: Option<u64>,
    /// uniform or zipfian (a peer only; default uniform)
    #[arg(long, value_name = "DIST", value_parser = value::distribution)]
    distribution: Option<Distribution>,
    /// Open loop: offer OPS operations/s in all (a peer only)
    #[arg(long, value_name = "OPS", value_parser = value::rate)]
    rate: Option<f64>,
    /// Keep the data directory for the next run to reuse
    #[arg(
        long_help = "Keep the data directory; a later run with the same --db and --keys reuses \
            the data instead of loading it again (tree \"bench-meta\" records what was loaded). \
            Without --keep the directory (and the parents the run created) is removed at the \
            end.",
        long
    )]
    keep: bool,
    /// Buffered I/O instead of O_DIRECT
    #[arg(long = "no-direct", action = ArgAction::SetFalse)]
    direct_io: bool,
    /// Skip the device ceiling (a peer only)
    #[arg(long = "no-ceiling", action = ArgAction::SetFalse)]
    ceiling: bool,
    /// Append the result as one JSON object to FILE
    #[arg(
        long_help = "Append the result as one JSON object to FILE (opened, or created, before \
            the run: a FILE that cannot be appended to fails at once).",
        long,
        value_name = "FILE"
    )]
    json: Option<PathBuf>,
    #[command(flatten)]
    tier: TierArgs,
}

fn lookup_after() -> String {
    format!(
        "\
DEFAULTS (Ferrite's benchmark)
    --db {dir}  --keys {keys}  --pool-mib {pool}  --seconds {seconds}  --seed {seed}
    --workers {workers} (the cores here)  --tasks {tasks}  --threads 1

OUTPUT
    Load progress on stderr (a bar redrawn in place on a terminal, a line every 10%
    otherwise). On stdout a summary: load time and rate, data size on disk (pages x
    4 KiB) and its ratio to the pool, lookups per second, latency percentiles from a
    HdrHistogram (2 significant digits), device reads per lookup, CPU (user + system)
    per lookup. With tasks (the default) also the device's random-read ceiling (4 KiB
    random reads on the page file through io_uring at queue depth 128, just before and
    just after the lookups, 3 s each or S/4 for runs under 12 s) and the mean of both,
    the ratio of lookups/s to that mean, and the share of worker time spent in tree
    work (running tasks), eviction, I/O submission, completion handling and idle.
    The last line is:

    result lookups_per_s=N keys=N pool_mib=M threads=T seconds=S lookups=N data_mib=D
           data_pool_ratio=R reads_per_lookup=R [dev_reads_per_op=R
           dev_read_kib_per_read=K dev_read_kib_per_op=K] [device_iops=N ratio=X
           device_iops_before=N device_iops_after=N mode=tasks workers=N tasks=N
           engine=E tree_pct=P evict_pct=P submit_pct=P complete_pct=P idle_pct=P]
           cpu_us_per_lookup=X p50_us=L p99_us=L max_us=L load_s=S reused=0|1 seed=X
           direct_io=0|1 store=ferrite workload=lookup ops_per_s=N tier_hits=N
           tier_misses=N obp=X tier_write_mib=X obp_windows=N obp_windows_over=N

    (on one line; the tier fields are zeros without --tier; the dev_ fields where /proc/diskstats lists the device holding the
    data: the whole device's reads while measuring, per lookup and KiB per read, with
    the same warning as the comparison workloads above 8 KiB a read; the other bracketed
    fields with tasks only, mode=direct otherwise). A wrong
    or missing value ends the run with exit status 2 and no result line. With a peer
    (--store rocksdb|wiredtiger|lmdb) the output is the comparison workload's
    (ferrite bench ycsb-a --help): its last line starts `result store=S workload=lookup`.

EXAMPLES
    ferrite bench lookup --db DIR --keys 4.6M --pool-mib 64 --seconds 20
    ferrite bench lookup --keys 20k --pool-mib 1 --seconds 1 --workers 2 --tasks 128
    ferrite bench lookup --direct-api --threads 8 --keep
    ferrite bench lookup --store lmdb --keys 1M --cache-mib 64",
        dir = lookup::DEFAULT_DIR,
        keys = lookup::DEFAULT_KEYS,
        pool = lookup::DEFAULT_POOL_MIB,
        seconds = lookup::DEFAULT_SECONDS,
        seed = lookup::DEFAULT_SEED,
        workers = LookupConfig::default().workers,
        tasks = LookupConfig::default().tasks,
    )
}

/// The options of the comparison workloads and of `compare`: a run's data, sizes, time and
/// concurrency. `--records` and `--cache-mib` are the names; `--keys` and `--pool-mib`, the
/// lookup benchmark's, are aliases.
#[derive(Debug, Args)]
pub struct RunOpts {
    /// The store's data directory (default ferrite-data/bench-STORE)
    #[arg(
        long_help = "The store's data directory (default ferrite-data/bench-STORE; compare: \
            ferrite-data/compare, the root of every store's); fills use DIR-fill, emptied \
            first; both removed at the end unless --keep.",
        long = "db", value_name = "DIR",
          value_parser = OsStringValueParser::new().try_map(value::path))]
    dir: Option<PathBuf>,
    /// Keys loaded (fills: keys inserted), default 4.6M
    #[arg(
        long_help = "Keys loaded (fills: keys inserted), default 4.6M (~10x the default \
            cache); --keys N is the same.",
        long, value_name = "N", visible_alias = "keys",
          value_parser = |s: &str| value::count(s, 1, u64::MAX / 4))]
    records: Option<u64>,
    /// Cache of every store, MiB (default 64)
    #[arg(
        long_help = "Cache of every store, MiB (default 64): Ferrite's pool, RocksDB's block \
            cache, WiredTiger's cache; LMDB has none (it uses the page cache). --pool-mib M is \
            the same.",
        long, value_name = "M", visible_alias = "pool-mib",
          value_parser = |s: &str| value::whole(s, 1, MAX_POOL_MIB))]
    cache_mib: Option<u64>,
    /// Ferrite only: MiB of the cache its change buffer may borrow (0: off)
    #[arg(
        long_help = "Ferrite only: MiB of the cache its change buffer (puts into leaves not in \
            memory) may borrow from the frames once puts need it; 0 turns it off (default: a \
            quarter of the cache from 16 MiB up, at most 128).",
        long, value_name = "M",
          value_parser = |s: &str| value::whole(s, 0, ferrite::MAX_CHANGE_BUFFER_BYTES >> 20))]
    change_buffer_mib: Option<u64>,
    /// Measured time (default 20)
    #[arg(long, value_name = "S", value_parser = value::seconds)]
    seconds: Option<f64>,
    /// Threads of the peers (and of Ferrite with --direct-api); default: cores
    #[arg(long, value_name = "T", value_parser = |s: &str| value::whole_usize(s, 1, 4096))]
    threads: Option<usize>,
    /// Ferrite's workers (default: cores)
    #[arg(long, value_name = "N", value_parser = |s: &str| value::whole_usize(s, 1, 1024))]
    workers: Option<usize>,
    /// Ferrite's tasks per worker (default 64)
    #[arg(long, value_name = "N", value_parser = |s: &str| value::whole_usize(s, 1, 1 << 16))]
    tasks: Option<usize>,
    /// Ferrite through its blocking API on --threads threads
    #[arg(
        long_help = "Ferrite through its blocking API on --threads threads (fill --sync: on \
            --committers threads).",
        long
    )]
    direct_api: bool,
    /// uniform or zipfian (default: zipfian for YCSB, uniform otherwise)
    #[arg(long, value_name = "DIST", value_parser = value::distribution)]
    distribution: Option<Distribution>,
    /// Open loop: offer OPS operations/s in all (Poisson arrivals)
    #[arg(
        long_help = "Open loop: offer OPS operations/s in all (Poisson arrivals); latency \
            counts from each operation's scheduled arrival. Default: closed loop.",
        long, value_name = "OPS", value_parser = value::rate)]
    rate: Option<f64>,
    /// Seed of the operation streams (default 1)
    #[arg(long, value_name = "X", value_parser = value::seed)]
    seed: Option<u64>,
    /// Keep the data directory after the run
    #[arg(
        long_help = "Keep the data directory after the run: loaded data for the next run with \
            the same --records to reuse; a fill's DIR-fill to look at (ferrite check, say), \
            which the next fill empties first.",
        long
    )]
    keep: bool,
    /// Buffered I/O instead of O_DIRECT
    #[arg(long = "no-direct", action = ArgAction::SetFalse)]
    direct_io: bool,
    /// Skip the device ceiling (it writes a 1 GiB file beside DIR once)
    #[arg(long = "no-ceiling", action = ArgAction::SetFalse)]
    ceiling: bool,
    /// The zipfian constant of zipfian key choices (default 0.99)
    #[arg(long, value_name = "X", value_parser = value::theta)]
    theta: Option<f64>,
    #[command(flatten)]
    disk_cap: DiskCapArgs,
    #[command(flatten)]
    tier: TierArgs,
}

/// A cap on the disk's requests, as a cloud volume's: the flags of `fill`, `ycsb-*` and
/// `tpcc`.
#[derive(Debug, Args, Default)]
pub struct DiskCapArgs {
    /// Reads per second the data's disk takes from the run, as a cloud volume's cap
    #[arg(
        long_help = "Reads per second the disk under --db takes from the run, as a cloud \
            volume's IOPS cap (a general-purpose one gives a few thousand): the process enters \
            a block-I/O cgroup of its own whose throttle holds the disk's read requests to N \
            per second, from the warm-up to the end of the window (the load, and TPC-C's \
            consistency checks, run at the disk's own pace). Every store runs in this \
            process, so each is held alike. Needs root and a cgroup v1 blkio or v2 io \
            controller; refused without them. The summary's `disk` line and the result's \
            disk_read_iops_cap say it held.",
        long, value_name = "N", value_parser = |s: &str| value::count(s, 1, 1 << 40))]
    disk_read_iops: Option<u64>,
    /// Writes per second the data's disk takes from the run (see --disk-read-iops)
    #[arg(
        long_help = "Writes per second the disk under --db takes from the run, as \
            --disk-read-iops does for reads; disk_write_iops_cap in the result.",
        long, value_name = "N", value_parser = |s: &str| value::count(s, 1, 1 << 40))]
    disk_write_iops: Option<u64>,
}

impl DiskCapArgs {
    fn cap(&self) -> ferrite_bench::measure::diskcap::IopsCap {
        ferrite_bench::measure::diskcap::IopsCap {
            read: self.disk_read_iops,
            write: self.disk_write_iops,
        }
    }
}

/// A second cache tier under the cache: the flags of every benchmark workload (Ferrite's
/// tier, or RocksDB's own on `--store rocksdb`).
#[derive(Debug, Args, Default)]
pub struct TierArgs {
    /// Ferrite and RocksDB: a second cache tier in FILE (made if missing)
    #[arg(
        long_help = "Ferrite and RocksDB: a second cache tier between the cache and the disk. \
            Ferrite's is in FILE (made if missing; a file in /dev/shm stands for a medium \
            faster than the disk): pages evicted from the pool are kept there, and a miss \
            looks there first; emptied at every open. RocksDB's is its secondary cache, in \
            memory (FILE unused), or with --rocksdb-tier persistent its persistent read cache \
            in files of the directory FILE (made for the run and removed after it if missing). \
            WiredTiger and LMDB have none.",
        long, value_name = "FILE",
        value_parser = OsStringValueParser::new().try_map(value::path))]
    tier: Option<PathBuf>,
    /// The tier's size, MiB (default: twice the pool)
    #[arg(long, requires = "tier", value_name = "M",
          value_parser = |s: &str| value::whole(s, 1, 1 << 30))]
    tier_mib: Option<u64>,
    /// Ferrite only: which evicted pages enter the tier: obp (default), all or never
    #[arg(
        long_help = "Ferrite only: which evicted pages enter the tier: obp (the default: while \
            the overhead-bypass ratio, pages inserted and dropped per page looked up, stays \
            under 10 % over about a second, measured per worker; again below 8 %), all, or \
            never.",
        long, requires = "tier", value_name = "POLICY", value_parser = ["obp", "all", "never"])]
    tier_admission: Option<String>,
    /// Ferrite only: whether a page enters a full tier only if read more often than the copy
    /// it replaces: frequency (default) or off
    #[arg(
        long_help = "Ferrite only: frequency (the default) or off. With frequency, an evicted \
            page admission lets in takes an occupied slot of the tier only if its page was \
            looked up more often lately than the page whose copy the tier's clock would push \
            out for it (counted in a small sketch, halved every ten lookups per slot; after \
            TinyLFU); a free slot takes any page. Off: admission alone decides.",
        long, requires = "tier", value_name = "FILTER", value_parser = ["frequency", "off"])]
    tier_filter: Option<String>,
    /// Ferrite only: nanoseconds added to every access of the tier's medium (default 0)
    #[arg(
        long_help = "Ferrite only: nanoseconds added to every access of the tier's medium \
            (default 0): a file in /dev/shm is DRAM; this makes it stand for a slower medium \
            (CXL memory, persistent memory, an SSD). A mapped medium spins that long per \
            access; a block medium holds each completion that long after submission.",
        long, requires = "tier", value_name = "NS",
        value_parser = |s: &str| value::whole(s, 0, 1_000_000_000))]
    tier_latency_ns: Option<u64>,
    /// Ferrite only: how the tier's medium is accessed: mapped (default) or block
    #[arg(
        long_help = "Ferrite only: how the tier's medium is accessed: mapped (the default: byte-addressable \
            memory, copied with loads and stores) or block (an SSD or a file on one: pages \
            read and written through the workers' rings, with O_DIRECT where the file \
            system has it; --tier-latency-ns then holds each completion that long).",
        long, requires = "tier", value_name = "MEDIUM", value_parser = ["mapped", "block"])]
    tier_medium: Option<String>,
    /// RocksDB's tier: secondary (default) or persistent
    #[arg(
        long_help = "RocksDB's tier: secondary (the default: its CompressedSecondaryCache, in \
            memory, the tier RocksDB documents for DRAM) or persistent (its persistent read \
            cache, NewPersistentCache, in files of the directory --tier FILE; at least 100 \
            MiB).",
        long, requires = "tier", value_name = "KIND", value_parser = ["secondary", "persistent"])]
    rocksdb_tier: Option<String>,
}

impl TierArgs {
    /// The tier these flags describe, for a pool of `pool_mib` (the default size is twice
    /// it); `None` without `--tier`.
    fn config(&self, pool_mib: u64) -> Option<TierConfig> {
        let path = self.tier.clone()?;
        Some(TierConfig {
            path,
            mib: self.tier_mib.unwrap_or(2 * pool_mib),
            latency_ns: self.tier_latency_ns.unwrap_or(0),
            admission: admission_of(self.tier_admission.as_deref()),
            filter: filter_of(self.tier_filter.as_deref()),
            medium: medium_of(self.tier_medium.as_deref()),
            rocksdb: self
                .rocksdb_tier
                .as_deref()
                .and_then(RocksDbTier::from_name)
                .unwrap_or_default(),
        })
    }
}

/// The medium a `--tier-medium` value names (mapped by default).
fn medium_of(name: Option<&str>) -> ferrite::TierMedium {
    match name {
        Some("block") => ferrite::TierMedium::Block,
        _ => ferrite::TierMedium::Mapped,
    }
}

/// The filter a `--tier-filter` value names (frequency by default).
fn filter_of(name: Option<&str>) -> ferrite::TierFilter {
    match name {
        Some("off") => ferrite::TierFilter::Off,
        _ => ferrite::TierFilter::Frequency,
    }
}

/// The admission policy a `--tier-admission` value names (OBP by default).
fn admission_of(name: Option<&str>) -> ferrite::TierAdmission {
    match name {
        Some("all") => ferrite::TierAdmission::All,
        Some("never") => ferrite::TierAdmission::Never,
        _ => ferrite::TierAdmission::DEFAULT,
    }
}

/// `ferrite bench ycsb-a` .. `ycsb-f`.
#[derive(Debug, Args)]
pub struct WorkloadCmd {
    /// ferrite (default), rocksdb, wiredtiger or lmdb
    #[arg(
        long_help = "ferrite (default), rocksdb, wiredtiger or lmdb; the peers need a build \
            with --features peers and their Debian -dev packages.",
        long, value_name = "STORE", value_parser = value::store)]
    store: Option<StoreKind>,
    #[command(flatten)]
    run: RunOpts,
    /// Append one JSON object per run to FILE
    #[arg(
        long_help = "Append one JSON object per run to FILE (with a hash of the configuration: \
            runs with the same `config` measured the same thing); FILE is opened, or created, \
            before the run: one that cannot be appended to fails at once.",
        long,
        value_name = "FILE"
    )]
    json: Option<PathBuf>,
}

/// `ferrite bench fill` (and `fill-seq`, `fill-random`, `fill-sync`).
#[derive(Debug, Args)]
pub struct FillCmd {
    #[command(flatten)]
    workload: WorkloadCmd,
    /// fill only: seq or random key order (default random)
    #[arg(long, value_name = "ORDER", value_parser = value::order)]
    order: Option<Order>,
    /// Acknowledge each insert once durable (fill-sync)
    #[arg(
        long_help = "Acknowledge each insert once durable (fill-sync): --committers N \
            concurrent committers each insert a new key in random order and wait until it is \
            durable before the next.",
        long
    )]
    sync: bool,
    /// fill --sync only: concurrent committers (default 1)
    #[arg(
        long_help = "fill --sync only: concurrent committers (default 1): threads for the \
            peers and with --direct-api, else Ferrite tasks spread over --workers; --threads \
            and --tasks do not apply to it.",
        long, value_name = "N",
          value_parser = |s: &str| value::whole_usize(s, 1, MAX_COMMITTERS as usize))]
    committers: Option<usize>,
}

const WORKLOAD_AFTER: &str = "\
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

    Each run loads the data set (or reuses one kept by an earlier run), measures the
    device's random-read ceiling, then runs the operations for S seconds after a warm-up
    of min(5, S/4) s, every value read checked.

OUTPUT
    Load progress on stderr; on stdout a summary (throughput, operation counts, latency
    percentiles from an HdrHistogram, CPU per operation, device reads, writes and cache
    flushes per operation from /proc/diskstats, bytes on disk, the device ceiling), then
    one line:

    result store=S workload=W ops_per_s=N seconds=S ops=N p50_us=L p99_us=L p999_us=L
           max_us=L cpu_us_per_op=X user_us_per_op=X sys_us_per_op=X
           [dev_reads_per_op=X dev_writes_per_op=X dev_read_kib_per_read=X
           dev_read_kib_per_op=X] [dev_flushes_per_op=X] [log_writes=N log_records_per_write=X
           log_kib_per_write=X log_write_us=X] [buffer_drains=N
           buffer_entries_per_drain=X] [worker_task_us_per_op=X
           worker_submit_us_per_op=X worker_complete_us_per_op=X worker_evict_us_per_op=X
           worker_idle_pct=X] [mem_mib=X mem_cache_mib=X mem_write_buffers_mib=X]
           tier_hits=N tier_misses=N obp=X tier_write_mib=X theta=X obp_peak=X
           obp_windows=N obp_windows_over=N bytes_on_disk=N records=N [load_s=S] [reused=0|1]
           [device_iops=N] mode=tasks|threads threads=N workers=N tasks=N
           [committers=N sync=1 verified=N] distribution=D loop=closed|open
           [target_ops_per_s=N] cache_mib=M seed=X config=HASH store_hash=HASH

    dev_read_kib_per_read is the KiB the device read per read it completed (about 4 for
    one 4 KiB block a read); the summary warns when a point workload (lookup, ycsb-b, c,
    d) reads more than 8 KiB per device read, the sign of a misconfigured store.
    config hashes the run's settings (workload, store, sizes, concurrency, seed);
    store_hash the options the store printed, so that runs of one config against a
    store tuned otherwise tell apart (--json keeps the options themselves).
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
    memtables). The tier fields (Ferrite or RocksDB with --tier; zeros otherwise): misses
    of the cache served from the tier and not, the overhead-bypass ratio of the measured
    time (pages copied in and dropped per page looked up; RocksDB's counts copies in only)
    and MiB written to the tier; theta is the zipfian constant (--theta); obp_windows
    counts Ferrite's full OBP windows while measuring (about a second each, one per 100 ms
    step, per worker) and obp_windows_over those whose OBP passed the admission's limit;
    obp_peak is the highest OBP of a window, sampled every 0.5 s. fill-sync adds committers, sync=1 and verified (keys read back after
    reopening); its tasks= counts the committer tasks over all workers (the other
    workloads: tasks per worker).

EXAMPLES
    ferrite bench ycsb-a --store rocksdb --records 1M --cache-mib 128 --threads 64
    ferrite bench ycsb-c --distribution uniform --rate 50k --json runs.jsonl
    ferrite bench fill --order seq --records 1M
    ferrite bench fill --sync --committers 64 --store ferrite";

/// `ferrite bench compare SUITE`.
#[derive(Debug, Args)]
pub struct CompareCmd {
    /// quick, ycsb, lookup-sweep, ycsb-sweep, sync, all, serve or tpcc
    #[arg(value_name = "SUITE", value_parser = value::suite)]
    suite: String,
    /// The stores to run (default: every store built in)
    #[arg(long, value_name = "STORE[,STORE...]", value_delimiter = ',',
          value_parser = value::store)]
    stores: Option<Vec<StoreKind>>,
    /// Where the SUITE tables (.md), runs (.jsonl) and the charts go (default bench-results)
    #[arg(
        long_help = "Where SUITE.md, SUITE.jsonl and the charts go (default bench-results); \
            DIR and SUITE.jsonl are made before the runs: a DIR that cannot be made or written \
            to fails at once.",
        long,
        value_name = "DIR",
        default_value = "bench-results"
    )]
    out: PathBuf,
    /// Run the whole suite N times (default 1, at most 100)
    #[arg(
        long_help = "Run the whole suite N times, one round after the other (default 1, at \
            most 100); each table cell is then the run with the median operations/s, and the \
            tables are followed by Ferrite's operations/s over RocksDB's for each row and \
            round, with their median.",
        long, value_name = "N", default_value_t = 1,
          value_parser = |s: &str| value::whole_usize(s, 1, MAX_ROUNDS as usize))]
    rounds: usize,
    /// tpcc only: warehouses (default 1; each ~100 MB of data)
    #[arg(long, value_name = "W",
          value_parser = |s: &str| value::whole(s, 1, u64::from(MAX_WAREHOUSES)))]
    warehouses: Option<u64>,
    /// tpcc only: a reduced data set (1,000 items, 30 customers per district): NOT TPC-C
    #[arg(long)]
    reduced_scale: bool,
    /// serve only: bytes per value (default 1024)
    #[arg(long, value_name = "B", value_parser = |s: &str| value::whole(s, 16, 1 << 30))]
    value_size: Option<u64>,
    /// serve only: GET:SET percentages (default 90:10)
    #[arg(long, value_name = "GET:SET", value_parser = serve_bench::parse_mix)]
    mix: Option<u32>,
    /// serve only: the offered rates, operations/s (default 2500,5000,10000,20000,40000,80000)
    #[arg(long, value_name = "OPS[,OPS...]", value_delimiter = ',',
          value_parser = |s: &str| value::whole(s, 1, 100_000_000))]
    rates: Option<Vec<u64>>,
    #[command(flatten)]
    run: RunOpts,
}

const COMPARE_AFTER: &str = "\
SUITES
    quick          lookup, ycsb-a, ycsb-c, ycsb-e, fill-random
    ycsb           ycsb-a .. ycsb-f (zipfian)
    lookup-sweep   lookups with 1..256 peer threads and Ferrite at 1x64, 2x64, 2x128 tasks
    ycsb-sweep     ycsb-a and ycsb-c with 2, 16, 64, 256 peer threads and Ferrite at 1x64, 2x64
    sync           fill --sync with 1, 8 and 64 committers on every store
    all            all of the above but sync, YCSB also uniform, and fill-seq
    serve          ferrite serve (durability sync, then none) against memcached with
                   extstore (when installed), each loaded once with --records items of
                   1 KiB (--value-size) in --cache-mib of memory, then 90:10 GET:SET
                   (--mix) open loop at 2.5k, 5k, 10k, 20k, 40k and 80k ops/s (--rates)
                   for --seconds each (--distribution, --db and --out apply; --stores does
                   not, and --rounds is refused): serve.md with the highest rate each served with a
                   p99 of at most 1 ms, serve.jsonl, serve-p99.svg and serve-ops.svg
    tpcc           ferrite bench tpcc on ferrite, rocksdb and wiredtiger (lmdb has no
                   transactions adapter: skipped, and the table says so) with
                   --warehouses W (default 1), --cache-mib, --seconds, --seed, --db,
                   --reduced-scale (a small data set for quick looks, NOT TPC-C, and
                   said so in the table) and --out (--stores picks the stores; --rounds
                   is refused): tpcc.md
                   with the stores as columns (tx/s, tpmC, reads and writes per
                   transaction and their source, CPU µs per transaction, New-Order p50
                   and p99, conflicts, consistency, isolation, cache hit ratio, bytes
                   per device read), tpcc.jsonl, tpcc-tx.svg
                   and tpcc-p99.svg; exit status 1 if a run failed or was inconsistent

    The other options are those of the workloads (ferrite bench ycsb-a --help) and apply
    to every run; each store's data set is loaded once and kept for the suite's runs.

OUTPUT
    A line per run on stderr; the tables on stdout, then
    result suite=NAME stores=LIST runs=N failed=N
    (runs counts every round's.) Exit status 1 when a run failed (the tables show what did
    run).

EXAMPLES
    ferrite bench compare quick --records 1M --seconds 10
    ferrite bench compare sync --stores ferrite,rocksdb --rounds 3 --out bench-results
    ferrite bench compare tpcc --warehouses 1 --cache-mib 256 --seconds 20";

/// `ferrite bench io`.
#[derive(Debug, Args)]
pub struct IoCmd {
    /// The data file (default ./ferrite-data/bench-io.dat)
    #[arg(
        long_help = "The data file (default ./ferrite-data/bench-io.dat); created and filled \
            with data up to --size-mib if missing or smaller, removed at the end unless \
            --keep. A block device is accepted for read patterns (only read). An existing file \
            that is not a bench io data file is only ever read: never extended, written or \
            removed.",
        long, value_name = "PATH",
          value_parser = OsStringValueParser::new().try_map(value::path))]
    file: Option<PathBuf>,
    /// io_uring, aio, psync, mmap, or all (default io_uring)
    #[arg(
        long_help = "io_uring, aio, psync, mmap, or all (default io_uring); with all, every \
            engine is measured in turn and the result line is io_uring's.",
        long, value_name = "ENGINE", value_parser = value::engines)]
    // (`::std::vec::Vec`: one value that is a list, not an option given many times.)
    engine: Option<::std::vec::Vec<EngineKind>>,
    /// randread, seqread, randwrite or seqwrite (default randread)
    #[arg(long, value_name = "PATTERN", value_parser = value::pattern)]
    pattern: Option<Pattern>,
    /// Bytes per request, a multiple of 4096 (default 4096; 4k, 64KiB, 1m style allowed)
    #[arg(long, value_name = "BYTES",
          value_parser = |s: &str| value::block_size(s, bench_io::MAX_BS))]
    bs: Option<usize>,
    /// Requests in flight per thread (default 64)
    #[arg(
        long_help = "Requests in flight per thread (default 64); psync and mmap perform each \
            request inside submit and run at depth 1, as fio does.",
        long, value_name = "N",
          value_parser = |s: &str| value::whole_usize(s, 1, bench_io::MAX_DEPTH))]
    depth: Option<usize>,
    /// Threads, each with its own engine (default 1)
    #[arg(long, value_name = "N",
          value_parser = |s: &str| value::whole_usize(s, 1, bench_io::MAX_THREADS))]
    threads: Option<usize>,
    /// Measured time per engine (default 10)
    #[arg(
        long_help = "Measured time per engine (default 10), after a warm-up of min(1, S/5) \
            seconds; fractions allowed.",
        long, value_name = "S", value_parser = value::seconds)]
    seconds: Option<f64>,
    /// The part of the file the requests cover, from its start, in MiB (default 1024)
    #[arg(long, value_name = "M",
          value_parser = |s: &str| value::whole(s, 1, bench_io::MAX_SIZE_MIB))]
    size_mib: Option<u64>,
    /// O_DIRECT (the default)
    #[arg(long, conflicts_with = "no_direct")]
    direct: bool,
    /// Buffered I/O through the page cache (the cache is dropped before each engine)
    #[arg(long = "no-direct")]
    no_direct: bool,
    /// Keep the data file for the next run
    #[arg(long)]
    keep: bool,
}

const IO_AFTER: &str = "\
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
    and ours over fio's.

OUTPUT
    A table with one row per engine: IOPS, MiB/s, latency p50/p99/p99.9, CPU per I/O,
    fio's IOPS and the ratio. The last line is:

    result iops=N engine=E depth=N threads=N pattern=P bs=N mib_per_s=R p50_us=L
           p99_us=L p999_us=L cpu_us_per_io=R seconds=S direct=0|1
           [fio_iops=N ratio=R]

    (on one line; fio_iops and ratio only when fio ran). With --engine all it is
    io_uring's.

EXAMPLES
    ferrite bench io
    ferrite bench io --engine all --pattern randread --depth 64 --seconds 5
    ferrite bench io --file /dev/nvme0n1 --pattern seqread --bs 1m";

/// `ferrite bench objects`.
#[derive(Debug, Args)]
pub struct ObjectsCmd {
    /// ferrite (default), file, rocksdb, rocksdb-blob or sqlite
    #[arg(
        long_help = "ferrite (default), file, rocksdb, rocksdb-blob or sqlite (the STORES \
            below); the peers need a build with --features peers.",
        long, value_name = "STORE", value_parser = ObjectStoreKind::parse)]
    store: Option<ObjectStoreKind>,
    /// randwrite (default), randread, seqwrite or seqread
    #[arg(long, value_name = "PATTERN", value_parser = objects::parse_pattern)]
    pattern: Option<Pattern>,
    /// Bytes per I/O: 2k, 4k (default), 16k, 64k or 256k
    #[arg(long, value_name = "SIZE", value_parser = objects::parse_block)]
    block: Option<usize>,
    /// Objects (default 4)
    #[arg(long, value_name = "N",
          value_parser = |s: &str| value::count(s, 1, objects::MAX_OBJECTS).map(|n| n as u32))]
    objects: Option<u32>,
    /// MiB per object (default 256)
    #[arg(long, value_name = "M",
          value_parser = |s: &str| value::whole(s, 1, objects::MAX_TOTAL_BYTES >> 20))]
    object_mib: Option<u64>,
    /// Threads (Ferrite: tasks), each one I/O at a time: the queue depth (default 32)
    #[arg(long, value_name = "D",
          value_parser = |s: &str| value::whole_usize(s, 1, objects::MAX_DEPTH))]
    depth: Option<usize>,
    /// Ferrite: D threads through the blocking API instead of D tasks on its workers
    #[arg(long)]
    direct_api: bool,
    /// Measured time (default 20; fractions allowed)
    #[arg(
        long_help = "Measured time (default 20), after a warm-up of min(S/5, 1) seconds; \
            fractions allowed.",
        long, value_name = "S", value_parser = value::seconds)]
    seconds: Option<f64>,
    /// Every write durable when it returns
    #[arg(
        long_help = "Every write durable when it returns, on every store: Ferrite \
            Durability::Sync, file O_DSYNC, RocksDB its WAL with WriteOptions.sync, SQLite \
            synchronous=FULL in WAL mode. Without it: Ferrite Durability::None, files without \
            O_DSYNC, RocksDB without its WAL, SQLite synchronous=NORMAL. The setup never syncs \
            its writes (the store settles after it).",
        long
    )]
    sync: bool,
    /// Where the data lives (default ferrite-data/bench-objects-STORE)
    #[arg(
        long_help = "Where the data lives (default ferrite-data/bench-objects-STORE): made if \
            missing, removed at the end (with the parents the run made) unless --keep. A \
            directory ferrite bench did not make is never emptied or removed: the run stops \
            instead. --db is the same.",
        long = "dir", visible_alias = "db", value_name = "PATH",
          value_parser = OsStringValueParser::new().try_map(value::path))]
    dir: Option<PathBuf>,
    /// Keep the data directory (a later run of the same data set reuses it)
    #[arg(
        long_help = "Keep the data directory: a later run of the same store, --objects and \
            --object-mib reuses the data instead of writing it again, unless a write run \
            changed it since (the file ferrite-bench-objects beside it says the data is the \
            setup's; a write run removes it before writing).",
        long
    )]
    keep: bool,
    /// The store's cache, MiB (default 64)
    #[arg(
        long_help = "The store's cache, MiB (default 64): Ferrite's pool, RocksDB's block \
            cache; SQLite: the page cache it reads through, capped with the process's memory \
            (a cgroup) where the machine allows; the file store has none (O_DIRECT).",
        long, value_name = "M", value_parser = |s: &str| value::whole(s, 1, MAX_POOL_MIB))]
    cache_mib: Option<u64>,
    /// Seed of the random offsets (default 1; decimal or 0x hex)
    #[arg(long, value_name = "X", value_parser = value::seed)]
    seed: Option<u64>,
    /// Append the result as one JSON object to FILE
    #[arg(
        long_help = "Append the result as one JSON object to FILE (the result line's fields, \
            the configuration and the store's options), opened, or created, before the run: \
            a FILE that cannot be appended to fails at once.",
        long,
        value_name = "FILE"
    )]
    json: Option<PathBuf>,
}

const OBJECTS_AFTER: &str = "\
MEASUREMENT
    Setup, not measured: N objects of M MiB, each written whole in order, 1 MiB at a
    time, unsynced; then the store settles (writes back; RocksDB flushes and compacts,
    SQLite checkpoints its WAL) and closes. A data set kept (--keep) by an earlier run of
    the same store, N and M is reused if no write run changed it since.

    Then the store opens again and D threads (--depth; each does one I/O at a time, so D
    is the queue depth; Ferrite: D tasks on its workers, or threads with --direct-api)
    run for S seconds after a warm-up of min(S/5, 1) s. Each
    operation reads or writes one block at a block-aligned offset of an object:
    randread/randwrite uniformly over every block of every object; seqread/seqwrite with
    a cursor per thread, each thread walking its own 1/D of the objects (laid end to end)
    block after block and wrapping. Threads own disjoint 4 KiB units (a block, for larger
    blocks): no two write the same bytes at once.

    Writes carry new content derived from (object, offset, version), made outside the
    timed call. Every read checks the 24-byte header and tag of each 2 KiB piece it read
    against the setup's content; after a write run each thread's last 64 writes are read
    back and compared byte for byte. A mismatch ends the run with exit status 2 and no
    result line.

STORES
    ferrite  Ferrite's objects: values of tree \"objects\" (keys obj-000001, ...),
             Tree::write_at_async / read_at_async from D tasks spread over its workers
             (one per core), the data through each worker's io_uring; with --direct-api
             Tree::write_at / read_at from D threads through the blocking API, no workers.
             A pool of --cache-mib, O_DIRECT.
    file     the physical reference: one file per object, preallocated (fallocate),
             pwrite / pread, O_DIRECT; where the file system refuses O_DIRECT (tmpfs, or a
             2k block on a device with 4 KiB sectors) buffered I/O, and the summary says so.
    rocksdb  each object as 4 KiB chunk values under keys obj/<object>/<chunk>; a write of
             part of a chunk (2k blocks) reads the chunk and writes it back whole; RocksDB
             opened as in the other comparisons (block cache of --cache-mib, partitioned
             index and bloom filters, direct reads, flushes and compactions).
    rocksdb-blob
             the same chunks with RocksDB's integrated BlobDB on (its setting for large
             values): chunk values in blob files of 256 MiB, blob garbage collection on.
             (An object as one BlobDB value is not offered: each 4 KiB write would rewrite
             the whole object.)
    sqlite   one table of BLOBs, a row per object preallocated with zeroblob, incremental
             BLOB I/O (sqlite3_blob_open / read / write), a connection per thread, WAL mode,
             auto_vacuum=INCREMENTAL (its pointer map lets SQLite reach an offset without
             reading the BLOB's chain of overflow pages, as SQLite's author advises); writers
             take turns (SQLite runs one write transaction at a time). SQLite reads
             through the OS page cache: the run caps the process's memory (a cgroup) at
             --cache-mib plus its own needs where it can; the summary says whether.
    Every store's options are printed in the summary (and hashed into store_hash).

OUTPUT
    Setup progress and the measured time on stderr. On stdout a summary (store and
    options, throughput, latency, write and space amplification, device reads and writes,
    CPU, what was verified), then one line:

    result store=S workload=objects pattern=P block=B ops_per_s=N mib_per_s=X p99_us=L
           write_amp=X space_amp=X p50_us=L p999_us=L max_us=L objects=N object_mib=M
           block_bytes=N depth=D api=tasks|threads sync=0|1 seconds=S ops=N
           cpu_us_per_op=X user_us_per_op=X sys_us_per_op=X [dev_reads_per_op=X
           dev_writes_per_op=X dev_read_kib_per_read=X dev_read_kib_per_op=X
           dev_write_kib_per_op=X]
           [dev_flushes_per_op=X] bytes_on_disk=N logical_bytes=N setup_s=S reused=0|1
           direct_io=0|1 [verified=N] cache_mib=M seed=X config=HASH store_hash=HASH

    ops_per_s and mib_per_s: operations finished in the measured window, and their bytes.
    Latencies (HdrHistogram, 2 significant digits) time the store's call alone.
    write_amp: bytes the device holding the data wrote in the measured window
    (/proc/diskstats; the whole device's, so other I/O on it counts) over the bytes the
    threads wrote in it; 0 for read patterns; - when the device's counters cannot be
    read. Writes a store defers past the window (dirty pages, compactions, checkpoints)
    are not in it. space_amp: bytes the store's files allocate once it closed after the
    run (st_blocks x 512 over the data directory, the benchmark's two small files left
    out) over N x M MiB. The dev_ fields (where /proc/diskstats lists the device): its
    reads and writes per operation, KiB per device read, KiB read and written per
    operation, cache flushes per operation, over the window. cpu_us_per_op: the process's
    processor time (user + system) over the operations. verified: blocks read back after
    a write run. setup_s is 0 when the data was reused. config hashes the run's settings,
    store_hash the options the store printed. api: tasks when Ferrite ran D tasks on
    its workers (the default), threads for every other run.

EXAMPLES
    ferrite bench objects --store file --pattern randwrite --block 4k --objects 4 \\
        --object-mib 64 --depth 32 --seconds 5
    ferrite bench objects --store ferrite --pattern randread --block 16k --sync
    ferrite bench objects --store rocksdb --pattern seqwrite --block 256k --keep";

/// `ferrite bench recovery`.
#[derive(Debug, Args)]
pub struct RecoveryCmd {
    /// The data directory (default ferrite-data/bench-recovery)
    #[arg(
        long_help = "The data directory (default ferrite-data/bench-recovery); emptied before \
            each run, removed at the end. A directory that ferrite bench did not make is never \
            emptied: the run stops instead.",
        long = "db", value_name = "DIR",
          value_parser = OsStringValueParser::new().try_map(value::path))]
    dir: Option<PathBuf>,
    /// The run lengths, one run each, in order (default 5,10,20)
    #[arg(
        long_help = "The run lengths, one run each, in order (default 5,10,20); fractions \
            allowed (0.5), at least 1 ms each, at most 64 runs.",
        long, value_name = "S[,S...]", value_parser = value::seconds_list)]
    // (`::std::vec::Vec`: one value that is a list, not an option given many times.)
    seconds: Option<::std::vec::Vec<f64>>,
    /// Concurrent committers (default 16)
    #[arg(
        long_help = "Concurrent committers (default 16): tasks spread round robin over the \
            workers, each inserting and waiting until the insert is durable (Durability::Sync) \
            before the next, as fill --sync does.",
        long, value_name = "N",
          value_parser = |s: &str| value::whole_usize(s, 1, MAX_COMMITTERS as usize))]
    committers: Option<usize>,
    /// Ferrite's workers (default: the number of cores)
    #[arg(long, value_name = "N", value_parser = |s: &str| value::whole_usize(s, 1, 1024))]
    workers: Option<usize>,
    /// Ferrite's pool, MiB (default 64)
    #[arg(long, value_name = "M", value_parser = |s: &str| value::whole(s, 1, MAX_POOL_MIB))]
    cache_mib: Option<u64>,
    /// A checkpoint starts once M MiB were logged since the last
    #[arg(
        long_help = "A checkpoint starts once M MiB were logged since the last \
            (Options::checkpoint_log_bytes; default: the engine's, the larger of the pool and twice \
            the data, between 256 MiB and 1 GiB). Log segments are the \
            engine's default but at most M MiB: a checkpoint frees whole segments only.",
        long, value_name = "M", value_parser = |s: &str| value::whole(s, 1, 1 << 20))]
    checkpoint_mib: Option<u64>,
    /// Keep the last run's data directory (for ferrite check, say)
    #[arg(long)]
    keep: bool,
    /// Buffered I/O instead of O_DIRECT
    #[arg(long = "no-direct", action = ArgAction::SetFalse)]
    direct_io: bool,
    /// Append one JSON object per run to FILE (the result line's fields)
    #[arg(
        long_help = "Append one JSON object per run to FILE (the result line's fields); \
            opened, or created, before the runs: a FILE that cannot be appended to fails at \
            once.",
        long,
        value_name = "FILE"
    )]
    json: Option<PathBuf>,
}

const RECOVERY_AFTER: &str = "\
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
    run. Recovery replays at most about as much.

OUTPUT
    Progress and a line per step on stderr. On stdout a table, one row per run: inserts
    and inserts/s, log written, log max and its ratio to the checkpoint interval, log
    replayed, records replayed, pages applied, recovery and open time, log segment files,
    keys verified and mismatches; then the longest run against the shortest (ratios of
    inserts, log written, recovery and open time, log replayed, log max) and the largest
    log on disk against the checkpoint interval. Then one line per passing run:

    result workload=recovery seconds=S ops=N ops_per_s=N log_max_bytes=N
           replayed_bytes=N replayed_records=N recovery_ms=X open_ms=X
           checkpoint_bytes=N verified=N pages_applied=N torn_bytes=N
           log_written_bytes=N log_files=N segment_bytes=N run_s=S verify_s=S
           store=ferrite sync=1 committers=N workers=N cache_mib=M

EXAMPLES
    ferrite bench recovery
    ferrite bench recovery --seconds 10,30,60 --committers 64 --checkpoint-mib 4 --keep";

/// `ferrite bench tpcc`.
#[derive(Debug, Args)]
pub struct TpccCmd {
    /// ferrite (the default), rocksdb or wiredtiger
    #[arg(
        long_help = "ferrite (the default), rocksdb or wiredtiger (the peers need a build with \
            --features peers; lmdb has no transactions adapter). RocksDB runs pessimistic \
            transactions (TransactionDB), WiredTiger snapshot isolation; each peer terminal \
            runs on a thread of its own.",
        long, value_name = "STORE", value_parser = value::store)]
    store: Option<StoreKind>,
    /// The data directory (default ferrite-data/bench-tpcc)
    #[arg(
        long_help = "The data directory (default ferrite-data/bench-tpcc). With --keep the \
            loaded database stays, and a later run with the same warehouses (and scale) \
            reuses it; otherwise it is removed at the end. A directory that ferrite bench did \
            not make is never removed: the run stops instead.",
        long = "db", value_name = "DIR",
          value_parser = OsStringValueParser::new().try_map(value::path))]
    dir: Option<PathBuf>,
    /// Warehouses (default 1; each ~100 MB of data)
    #[arg(long, value_name = "W",
          value_parser = |s: &str| value::whole(s, 1, u64::from(MAX_WAREHOUSES)))]
    warehouses: Option<u64>,
    /// The store's cache, MiB (default 1024): pool, block cache or cache_size
    #[arg(long, value_name = "M", value_parser = |s: &str| value::whole(s, 1, MAX_POOL_MIB))]
    cache_mib: Option<u64>,
    /// Seconds measured, after the warm-up (default 30)
    #[arg(long, value_name = "S", value_parser = value::seconds)]
    seconds: Option<f64>,
    /// Ferrite's workers (default: the number of cores)
    #[arg(long, value_name = "N", value_parser = |s: &str| value::whole_usize(s, 1, 1024))]
    workers: Option<usize>,
    /// Ferrite: a checkpoint starts once M MiB were logged since the last (default: the engine's)
    #[arg(
        long_help = "Ferrite: a checkpoint starts once M MiB were logged since the last \
            (Options::checkpoint_log_bytes; default: the engine's, the larger of the pool and twice \
            the data, between 256 MiB and 1 GiB). A page's first \
            write-back after a checkpoint logs the whole page (against torn writes): rarer \
            checkpoints log fewer page images, and leave recovery more log to replay. The \
            summary gives the images and checkpoints of the run.",
        long, value_name = "M", value_parser = |s: &str| value::whole(s, 1, 1 << 20))]
    checkpoint_mib: Option<u64>,
    /// Terminals per warehouse (default 10, one per district)
    #[arg(long, value_name = "N", value_parser = |s: &str| value::whole(s, 1, 1000))]
    terminals_per_warehouse: Option<u64>,
    /// Terminals of a warehouse on one worker (on, the default) or spread (off)
    #[arg(long, value_name = "on|off", value_parser = value::on_off)]
    affinity: Option<bool>,
    /// Keying and think times per the specification (default: none, back to back)
    #[arg(long)]
    spec_times: bool,
    /// Durable commits: each returns once its log record is synced (group commit)
    #[arg(long)]
    sync: bool,
    /// Paper parity, without a log: the peers' logs off; Ferrite keeps its log but syncs no commit
    #[arg(
        long_help = "Paper parity, without a log. The peers turn theirs off (RocksDB \
            disableWAL, WiredTiger log=(enabled=false)). Ferrite cannot turn its log off: \
            commits are logged but never synced (Durability::None, as without --sync), and \
            the summary says so. Without --sync or --no-log every store logs its commits \
            without syncing them.",
        long
    )]
    no_log: bool,
    /// The seed of the load and of the terminals (default 42)
    #[arg(long, value_name = "X", value_parser = value::seed)]
    seed: Option<u64>,
    /// Keep the loaded database for the next run
    #[arg(long)]
    keep: bool,
    /// Only check the consistency of the data set kept in --db (after a crash, say)
    #[arg(
        long_help = "Only check the consistency of the data set kept in --db, after a crash \
            for instance: open the store (which recovers it first; Ferrite says what its \
            recovery replayed), check every condition, print the outcome and one result \
            line (workload=tpcc-check), and exit 1 if a condition fails. Nothing is loaded, \
            run or removed. The directory must hold a load of the same --warehouses, \
            --reduced-scale and --store, made with --keep.",
        long
    )]
    check: bool,
    /// Buffered I/O instead of O_DIRECT
    #[arg(long = "no-direct", action = ArgAction::SetFalse)]
    direct_io: bool,
    /// A reduced data set for tests (1,000 items, 30 customers per district): NOT TPC-C
    #[arg(long)]
    reduced_scale: bool,
    #[command(flatten)]
    disk_cap: DiskCapArgs,
    /// Append the result line's fields as one JSON object to FILE
    #[arg(
        long_help = "Append the result line's fields as one JSON object to FILE; opened, or \
            created, before the run: a FILE that cannot be appended to fails at once.",
        long,
        value_name = "FILE"
    )]
    json: Option<PathBuf>,
}

const TPCC_AFTER: &str = "\
SCHEMA
    Nine tables as trees, with order-preserving big-endian composite keys, plus the
    customer-by-last-name and order-by-customer indexes; rows in a compact binary form,
    money in integer cents. History rows are keyed by warehouse, run, terminal and the
    terminal's sequence. NURand constants follow clause 2.1.6 (the run's C for C_LAST
    differs from the load's by 65..119, not 96 or 112). 1 % of New-Orders roll back (an
    unused item: nothing is written), 1 % of order lines and 15 % of Payments are remote
    when there are several warehouses; 60 % of Payments and Order-Status find the
    customer by last name. Delivery runs in the terminal, all ten districts in one
    transaction, one at a time per warehouse (as a deferred queue would run them).

STORES
    ferrite: terminals are tasks on its workers (--workers, --affinity). rocksdb: a
    pessimistic TransactionDB (a snapshot per transaction, rows read for update locked,
    deadlock detection, 1 s lock timeout). wiredtiger: snapshot isolation. On a peer each
    terminal is a thread of its own, every table is one key prefix of the one key space,
    and the cache (--cache-mib) is its block cache or cache_size; its data go in
    DIR/STORE. The summary prints each store's options and isolation.

MEASUREMENT
    Transactions conflicting (at the commit, or a peer's lock) are run again and counted
    per type. Latency is per transaction type, from its start to its commit (conflicts and
    retries included). On Ferrite reads_per_tx and writes_per_tx are the buffer pool's
    pages; on a peer, which counts none, they are the device's (whole device, the log's
    writes included; zero when /proc/diskstats does not have it), and io_source says
    which. CPU is the process's user + system time in the window. The store's own
    counters are read before and after the window: RocksDB's statistics tickers (block
    cache hits and misses, by data, index and filter blocks; blocks added and their bytes;
    compaction and flush bytes) and WiredTiger's cache statistics (pages requested from and
    read into its cache, bytes read into and written from it, pages evicted by application
    threads); cache_hit_ratio is RocksDB's block cache hits / (hits + misses) and
    WiredTiger's 1 - pages read into cache / pages requested (Ferrite's pool counts no hits:
    no field). bytes_per_read is the device's sectors read x 512 / reads completed.

OUTPUT
    Progress on stderr. On stdout a summary (tx/s, tpmC, per type: count, share, p50,
    p99, conflicts, rollbacks; reads, writes and CPU per transaction; bytes per device
    read; the store's cache hit ratio and counters; the workers' time and each one's
    share running tasks; the consistency checks) and one line:

    result store=ferrite|rocksdb|wiredtiger workload=tpcc warehouses=W tx_per_s=N tpmc=N
           reads_per_tx=X writes_per_tx=X consistency=ok|failed scale=spec|reduced
           ops_per_s=N tx=N seconds=S cpu_us_per_tx=X
           [disk_reads_per_tx=X disk_writes_per_tx=X]
           new_order=N new_order_p50_us=X new_order_p99_us=X new_order_conflicts=N
           (the same four for payment, order_status, delivery, stock_level)
           rollbacks=N isolation=serializable|snapshot-locking|snapshot
           durability=sync|none no_log=0|1 affinity=0|1 spec_times=0|1 terminals=N
           workers=N cache_mib=M seed=X io_source=pool|device|unknown
           [cache_hit_ratio=X] [bytes_per_read=N]

    (workers: on a peer, the terminals' threads. cache_hit_ratio: the peers only;
    bytes_per_read: where /proc/diskstats has the device.)

    tpmc counts the New-Orders committed per minute. A consistency violation is listed,
    the line says consistency=failed and the command exits with status 1.

    With --check, only the kept data set is checked, and the line is:

    result store=S workload=tpcc-check warehouses=W consistency=ok|failed violations=N
           scale=spec|reduced open_seconds=X check_seconds=X

CRASHES
    A run killed in the middle (or a machine that lost power) leaves the kept data set
    as the store recovers it. To check that it is still consistent:

    ferrite bench tpcc --db DIR --warehouses 2 --keep --seconds 600   (killed meanwhile)
    ferrite bench tpcc --db DIR --warehouses 2 --check

EXAMPLES
    ferrite bench tpcc --warehouses 1 --cache-mib 256 --seconds 20
    ferrite bench tpcc --warehouses 10 --cache-mib 100 --seconds 60 --keep
    ferrite bench tpcc --warehouses 4 --sync --affinity off
    ferrite bench tpcc --store rocksdb --warehouses 1 --cache-mib 256 --seconds 20";

// ---------------------------------------------------------------------------------------
// What the command line asks for, after conversion.

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Print this text (help) on stdout.
    Help(String),
    Version,
    Put(PutArgs),
    Get(GetArgs),
    Del(KeyArgs),
    Scan(ScanArgs),
    Dump(DumpArgs),
    Load(LoadArgs),
    Backup(BackupArgs),
    Compact(CompactArgs),
    WriteAt(WriteAtArgs),
    ReadAt(ReadAtArgs),
    Stat(KeyArgs),
    Trees(TreesArgs),
    Stats(StatsArgs),
    Check(CheckArgs),
    BenchLookup(LookupConfig),
    BenchIo(IoBenchConfig),
    BenchObjects(ObjectsConfig),
    /// A comparison workload (`lookup --store PEER`, `fill`, `ycsb-a` .. `ycsb-f`).
    BenchWorkload(RunConfig),
    BenchCompare(CompareArgs),
    BenchRecovery(RecoveryConfig),
    BenchServe(ServeConfig),
    BenchTpcc(TpccConfig),
    Serve(ServeArgs),
    /// Print the completion script of this shell.
    Completions(Shell),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutArgs {
    pub db: DbArgs,
    pub tree: String,
    pub key: Vec<u8>,
    pub value: ValueSource,
}

/// Where the bytes of `put` and `write-at` come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueSource {
    /// VALUE, decoded (text or hex).
    Arg(Vec<u8>),
    /// `--value-file PATH` (`-`: standard input), streamed.
    File(FileArg),
}

/// The key a command is about: `del`, `stat`, and the key of `get` and `read-at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyArgs {
    pub db: DbArgs,
    pub tree: String,
    /// KEY was given in hex, and is printed (with `get`'s value) in hex.
    pub hex: bool,
    pub key: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetArgs {
    pub key: KeyArgs,
    /// `--output PATH`: the raw value, streamed there (`-`: standard output).
    pub output: Option<FileArg>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteAtArgs {
    pub db: DbArgs,
    pub tree: String,
    pub key: Vec<u8>,
    pub offset: u64,
    pub value: ValueSource,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadAtArgs {
    pub key: KeyArgs,
    pub offset: u64,
    pub length: u64,
    /// `--output PATH` (`-`, like none: standard output).
    pub output: Option<FileArg>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpArgs {
    pub db: DbArgs,
    pub tree: Option<String>,
    pub hex: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupArgs {
    pub db: DbArgs,
    pub to: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactArgs {
    pub db: DbArgs,
    pub tree: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadArgs {
    pub db: DbArgs,
    pub tree: Option<String>,
    pub hex: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanArgs {
    pub db: DbArgs,
    pub tree: String,
    pub hex: bool,
    /// Inclusive lower bound.
    pub from: Option<Vec<u8>>,
    /// Exclusive upper bound.
    pub to: Option<Vec<u8>>,
    pub limit: Option<u64>,
    pub reverse: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreesAction {
    List,
    Create(String),
    Drop(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreesArgs {
    pub db: DbArgs,
    pub action: TreesAction,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatsArgs {
    pub source: StatsSource,
    /// Skip the per-tree walk.
    pub quick: bool,
    /// One JSON object instead of the text.
    pub json: bool,
}

/// Where `ferrite stats` gets its numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatsSource {
    /// A data directory, opened read-only.
    Dir(DbArgs),
    /// A running `ferrite serve`, asked over its `stats` command (`HOST:PORT`).
    Server(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckArgs {
    pub db: DbArgs,
    /// One JSON object instead of the text.
    pub json: bool,
}

/// `ferrite bench compare SUITE`.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareArgs {
    pub suite: String,
    /// Where the markdown table, the JSON lines and the charts go.
    pub out: PathBuf,
    /// The template every run starts from (data directory root, sizes, seconds, ...).
    pub base: RunConfig,
    pub stores: Vec<StoreKind>,
    /// Times the whole suite runs (every step on every store per round).
    pub rounds: usize,
    /// The serve suite's own options.
    pub serve: ServeSweep,
    /// The tpcc suite's warehouses.
    pub warehouses: u16,
    /// The tpcc suite at the reduced scale (NOT TPC-C).
    pub reduced_scale: bool,
}

/// What `bench compare serve` takes beyond the common options.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeSweep {
    pub value_size: usize,
    pub get_percent: u32,
    /// `None`: the suite's usual rates.
    pub rates: Option<Vec<f64>>,
}

/// A command line that does not parse: the message, and the usage of the command it was
/// for. Exit status 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError {
    /// The command's path (`get`, `bench lookup`), empty for the top level.
    pub command: String,
    /// What is wrong (clap's message, with its tips).
    pub message: String,
    /// `ferrite get [OPTIONS] --tree <TREE> --db <DIR> <KEY>`.
    pub usage: String,
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let command =
            if self.command.is_empty() { String::new() } else { format!("{} ", self.command) };
        write!(f, "{}\nusage: {}\nrun `ferrite {command}--help` for more", self.message, self.usage)
    }
}

impl std::error::Error for UsageError {}

impl Cli {
    /// Parses the arguments after the program name.
    pub fn parse_args(args: &[OsString]) -> Result<Action, UsageError> {
        let argv = std::iter::once(OsString::from("ferrite")).chain(args.iter().cloned());
        let cli = match Cli::try_parse_from(argv) {
            Ok(cli) => cli,
            Err(e) => {
                return match e.kind() {
                    ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                        Ok(Action::Help(e.render().to_string()))
                    }
                    // (clap would print the help on stderr.)
                    ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                        let path = command_path(args);
                        let missing = if path.is_empty() { "COMMAND" } else { "WORKLOAD" };
                        Err(usage_error(&path, &format!("missing {missing}")))
                    }
                    // Help wins over errors in the same command line.
                    _ if wants_help(args) => Ok(Action::Help(help(&command_path(args), args))),
                    _ => Err(usage_error(&command_path(args), &clap_message(&e))),
                };
            }
        };
        cli.command.into_action()
    }
}

/// Whether the arguments ask for help (`-h` or `--help` before any `--`).
fn wants_help(args: &[OsString]) -> bool {
    args.iter().take_while(|a| *a != "--").any(|a| a == "-h" || a == "--help")
}

/// The help of the command at `path`: the long one when `args` hold `--help`.
fn help(path: &[String], args: &[OsString]) -> String {
    let long = args.iter().take_while(|a| *a != "--").any(|a| a == "--help");
    with_subcommand(path, |sub| {
        if long { sub.render_long_help() } else { sub.render_help() }.to_string()
    })
}

/// `f` of the declared command at `path` (`["bench", "lookup"]`; empty: `ferrite`).
fn with_subcommand<T>(path: &[String], f: impl FnOnce(&mut clap::Command) -> T) -> T {
    let mut command = Cli::command();
    command.build();
    let mut sub = &mut command;
    for name in path {
        sub = sub.find_subcommand_mut(name).expect("a declared subcommand");
    }
    f(sub)
}

/// clap's message without its own usage and hint (the [`UsageError`] adds them).
fn clap_message(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    let end = ["\nUsage:", "\nFor more information"]
        .iter()
        .filter_map(|cut| text.find(cut))
        .min()
        .unwrap_or(text.len());
    text[..end].trim_end().to_owned()
}

/// The subcommands named at the start of `args` (`["bench", "lookup"]`): the command an
/// error is about.
fn command_path(args: &[OsString]) -> Vec<String> {
    let mut command = Cli::command();
    let mut path = Vec::new();
    for arg in args {
        let Some(name) = arg.to_str() else { break };
        let Some(sub) = command.find_subcommand(name) else { break };
        path.push(sub.get_name().to_owned());
        command = sub.clone();
    }
    path
}

/// An error about the command at `path`, with its usage.
fn usage_error(path: &[String], message: &str) -> UsageError {
    let usage = with_subcommand(path, |sub| sub.render_usage().to_string());
    let usage = usage.strip_prefix("Usage: ").unwrap_or(&usage).trim_end().to_owned();
    UsageError { command: path.join(" "), message: message.to_owned(), usage }
}

/// An error of a conversion about `command` (`"bench lookup"`).
fn refuse(command: &str, message: impl Into<String>) -> UsageError {
    let path: Vec<String> = command.split(' ').map(str::to_owned).collect();
    usage_error(&path, &message.into())
}

impl Command {
    fn into_action(self) -> Result<Action, UsageError> {
        match self {
            Command::Put(cmd) => put_args(cmd).map(Action::Put),
            Command::Get(cmd) => get_args(cmd).map(Action::Get),
            Command::Del(cmd) => key_args("del", cmd).map(Action::Del),
            Command::Scan(cmd) => scan_args(cmd).map(Action::Scan),
            Command::Dump(cmd) => {
                Ok(Action::Dump(DumpArgs { db: cmd.db, tree: cmd.tree, hex: cmd.hex }))
            }
            Command::Backup(cmd) => Ok(Action::Backup(BackupArgs { db: cmd.db, to: cmd.to })),
            Command::Compact(cmd) => {
                Ok(Action::Compact(CompactArgs { db: cmd.db, tree: cmd.tree }))
            }
            Command::Load(cmd) => {
                Ok(Action::Load(LoadArgs { db: cmd.db, tree: cmd.tree, hex: cmd.hex }))
            }
            Command::WriteAt(cmd) => write_at_args(cmd).map(Action::WriteAt),
            Command::ReadAt(cmd) => read_at_args(cmd).map(Action::ReadAt),
            Command::Stat(cmd) => key_args("stat", cmd).map(Action::Stat),
            Command::Trees(cmd) => Ok(Action::Trees(trees_args(cmd))),
            Command::Stats(cmd) => {
                let source = match (cmd.server, cmd.db) {
                    (Some(addr), _) => StatsSource::Server(addr),
                    (None, Some(db)) => StatsSource::Dir(db),
                    (None, None) => unreachable!("clap requires --db or --server"),
                };
                Ok(Action::Stats(StatsArgs { source, quick: cmd.quick, json: cmd.json }))
            }
            Command::Check(cmd) => Ok(Action::Check(CheckArgs { db: cmd.db, json: cmd.json })),
            Command::Serve(cmd) => Ok(Action::Serve(serve_args(cmd))),
            Command::Bench(cmd) => cmd.workload.into_action(),
            Command::Completions(cmd) => Ok(Action::Completions(match cmd.shell.as_str() {
                "zsh" => Shell::Zsh,
                "fish" => Shell::Fish,
                _ => Shell::Bash,
            })),
            Command::Version => Ok(Action::Version),
        }
    }
}

/// Bytes from an argument, as text or hex.
fn bytes(command: &str, what: &str, arg: &OsString, hex: bool) -> Result<Vec<u8>, UsageError> {
    decode_arg(arg, hex).map_err(|e| refuse(command, format!("{what}: {e}")))
}

/// VALUE or `--value-file PATH`, exactly one: clap refuses both (and says so), this
/// neither. (Were VALUE declared required unless --value-file is present, clap's usage line
/// would not mention --value-file; as a required group, it would put it before KEY.)
fn value_source(
    command: &str,
    value: Option<OsString>,
    file: Option<FileArg>,
    hex: bool,
) -> Result<ValueSource, UsageError> {
    match (value, file) {
        (Some(value), _) => bytes(command, "VALUE", &value, hex).map(ValueSource::Arg),
        (None, Some(file)) => Ok(ValueSource::File(file)),
        (None, None) => Err(refuse(
            command,
            "the following required arguments were not provided:\n  <VALUE> or --value-file \
             <PATH>",
        )),
    }
}

fn put_args(cmd: PutCmd) -> Result<PutArgs, UsageError> {
    Ok(PutArgs {
        key: bytes("put", "KEY", &cmd.key, cmd.hex)?,
        value: value_source("put", cmd.value, cmd.value_file, cmd.hex)?,
        db: cmd.db,
        tree: cmd.tree,
    })
}

fn key_args(command: &str, cmd: KeyCmd) -> Result<KeyArgs, UsageError> {
    let key = bytes(command, "KEY", &cmd.key, cmd.hex)?;
    Ok(KeyArgs { db: cmd.db, tree: cmd.tree, hex: cmd.hex, key })
}

fn get_args(cmd: GetCmd) -> Result<GetArgs, UsageError> {
    let key = bytes("get", "KEY", &cmd.key, cmd.hex)?;
    Ok(GetArgs {
        key: KeyArgs { db: cmd.db, tree: cmd.tree, hex: cmd.hex, key },
        output: cmd.output,
    })
}

fn write_at_args(cmd: WriteAtCmd) -> Result<WriteAtArgs, UsageError> {
    Ok(WriteAtArgs {
        key: bytes("write-at", "KEY", &cmd.key, cmd.hex)?,
        value: value_source("write-at", cmd.value, cmd.value_file, cmd.hex)?,
        offset: cmd.offset,
        db: cmd.db,
        tree: cmd.tree,
    })
}

fn read_at_args(cmd: ReadAtCmd) -> Result<ReadAtArgs, UsageError> {
    let key = bytes("read-at", "KEY", &cmd.key, cmd.hex)?;
    Ok(ReadAtArgs {
        key: KeyArgs { db: cmd.db, tree: cmd.tree, hex: cmd.hex, key },
        offset: cmd.offset,
        length: cmd.length,
        output: cmd.output,
    })
}

fn scan_args(cmd: ScanCmd) -> Result<ScanArgs, UsageError> {
    let bound = |what: &str, arg: &Option<OsString>| {
        arg.as_ref().map(|arg| bytes("scan", what, arg, cmd.hex)).transpose()
    };
    Ok(ScanArgs {
        from: bound("--from", &cmd.from)?,
        to: bound("--to", &cmd.to)?,
        db: cmd.db,
        tree: cmd.tree,
        hex: cmd.hex,
        limit: cmd.limit,
        reverse: cmd.reverse,
    })
}

fn trees_args(cmd: TreesCmd) -> TreesArgs {
    let action = match (cmd.create, cmd.drop) {
        (Some(name), _) => TreesAction::Create(name),
        (None, Some(name)) => TreesAction::Drop(name),
        (None, None) => TreesAction::List,
    };
    TreesArgs { db: cmd.db, action }
}

impl BenchWorkload {
    fn into_action(self) -> Result<Action, UsageError> {
        let ycsb = |letter: char, cmd: WorkloadCmd| {
            workload_config(Workload::Ycsb(letter), cmd).map(Action::BenchWorkload)
        };
        match self {
            BenchWorkload::Lookup(cmd) => lookup_action(cmd),
            BenchWorkload::Fill(cmd) => fill_config("fill", cmd).map(Action::BenchWorkload),
            BenchWorkload::FillSeq(cmd) => fill_config("fill-seq", cmd).map(Action::BenchWorkload),
            BenchWorkload::FillRandom(cmd) => {
                fill_config("fill-random", cmd).map(Action::BenchWorkload)
            }
            BenchWorkload::FillSync(cmd) => {
                fill_config("fill-sync", cmd).map(Action::BenchWorkload)
            }
            BenchWorkload::YcsbA(cmd) => ycsb('a', cmd),
            BenchWorkload::YcsbB(cmd) => ycsb('b', cmd),
            BenchWorkload::YcsbC(cmd) => ycsb('c', cmd),
            BenchWorkload::YcsbD(cmd) => ycsb('d', cmd),
            BenchWorkload::YcsbE(cmd) => ycsb('e', cmd),
            BenchWorkload::YcsbF(cmd) => ycsb('f', cmd),
            BenchWorkload::Compare(cmd) => compare_args(cmd).map(Action::BenchCompare),
            BenchWorkload::Io(cmd) => io_config(cmd).map(Action::BenchIo),
            BenchWorkload::Objects(cmd) => objects_config(cmd).map(Action::BenchObjects),
            BenchWorkload::Recovery(cmd) => recovery_config(cmd).map(Action::BenchRecovery),
            BenchWorkload::Serve(cmd) => serve_bench_config(cmd).map(Action::BenchServe),
            BenchWorkload::Tpcc(cmd) => tpcc_config(cmd).map(Action::BenchTpcc),
        }
    }
}

/// `bench lookup`: without `--store` (or with `--store ferrite`) Ferrite's lookup benchmark,
/// with a peer the comparison workload `lookup` on it.
fn lookup_action(cmd: LookupCmd) -> Result<Action, UsageError> {
    match cmd.store {
        None | Some(StoreKind::Ferrite) => lookup_config(cmd).map(Action::BenchLookup),
        Some(store) => lookup_run_config(store, cmd).map(Action::BenchWorkload),
    }
}

/// `bench lookup` on Ferrite: its [`LookupConfig`].
fn lookup_config(cmd: LookupCmd) -> Result<LookupConfig, UsageError> {
    const COMMAND: &str = "bench lookup";
    for (given, name) in [
        (cmd.distribution.is_some(), "--distribution"),
        (cmd.rate.is_some(), "--rate"),
        (!cmd.ceiling, "--no-ceiling"),
    ] {
        if given {
            return Err(refuse(
                COMMAND,
                format!(
                    "{name} is for the comparison workload (bench lookup --store \
                     rocksdb|wiredtiger|lmdb, or bench ycsb-c)"
                ),
            ));
        }
    }
    if cmd.tier.rocksdb_tier.is_some() {
        return Err(refuse(COMMAND, "--rocksdb-tier is for --store rocksdb"));
    }
    let defaults = LookupConfig::default();
    let config = LookupConfig {
        dir: cmd.dir.unwrap_or(defaults.dir),
        keys: cmd.keys.unwrap_or(defaults.keys),
        pool_mib: cmd.pool_mib.unwrap_or(defaults.pool_mib),
        seconds: cmd.seconds.unwrap_or(defaults.seconds),
        threads: cmd.threads.unwrap_or(defaults.threads),
        seed: cmd.seed.unwrap_or(defaults.seed),
        keep: cmd.keep,
        direct_io: cmd.direct_io,
        workers: cmd.workers.unwrap_or(defaults.workers),
        tasks: cmd.tasks.unwrap_or(defaults.tasks),
        engine: cmd.engine.or(defaults.engine),
        devices: cmd.devices.unwrap_or(defaults.devices),
        direct_api: cmd.direct_api,
        tier: cmd.tier.config(cmd.pool_mib.unwrap_or(defaults.pool_mib)),
        json: cmd.json,
    };
    // The ranges that only the benchmark knows (threads, tasks per worker, devices).
    config.validate().map_err(|e| refuse(COMMAND, e.to_string()))?;
    Ok(config)
}

/// `bench lookup --store PEER`: the comparison workload's [`RunConfig`].
fn lookup_run_config(store: StoreKind, cmd: LookupCmd) -> Result<RunConfig, UsageError> {
    const COMMAND: &str = "bench lookup";
    if cmd.engine.is_some() || cmd.devices.is_some() {
        let name = if cmd.engine.is_some() { "--engine" } else { "--devices" };
        return Err(refuse(COMMAND, format!("{name} is for Ferrite's lookup benchmark")));
    }
    let run = RunOpts {
        dir: cmd.dir,
        records: cmd.keys,
        cache_mib: cmd.pool_mib,
        change_buffer_mib: None,
        seconds: cmd.seconds,
        threads: cmd.threads,
        workers: cmd.workers,
        tasks: cmd.tasks,
        direct_api: cmd.direct_api,
        distribution: cmd.distribution,
        rate: cmd.rate,
        seed: cmd.seed,
        keep: cmd.keep,
        direct_io: cmd.direct_io,
        ceiling: cmd.ceiling,
        theta: None,
        disk_cap: DiskCapArgs::default(),
        tier: cmd.tier,
    };
    let mut config = run_config(COMMAND, &run, RunConfig::new(Workload::Lookup, store))?;
    config.json = cmd.json;
    Ok(config)
}

/// `bench ycsb-*`: its [`RunConfig`].
fn workload_config(workload: Workload, cmd: WorkloadCmd) -> Result<RunConfig, UsageError> {
    let command = format!("bench {}", workload.name());
    let store = cmd.store.unwrap_or(StoreKind::Ferrite);
    let mut config = run_config(&command, &cmd.run, RunConfig::new(workload, store))?;
    config.json = cmd.json;
    Ok(config)
}

/// `bench fill` (`fill-seq`, `fill-random`, `fill-sync`): its [`RunConfig`]. `--sync` turns
/// a random-order fill into `fill-sync`, whose concurrency is `--committers` (default 1).
/// `--committers` means nothing to the other fills, and `--threads` / `--tasks` nothing to
/// `fill-sync`: each is refused where it does not apply.
fn fill_config(name: &str, cmd: FillCmd) -> Result<RunConfig, UsageError> {
    let command = format!("bench {name}");
    let refuse = |message: &str| refuse(&command, message);
    let workload = match (name, cmd.order) {
        ("fill", None | Some(Order::Random)) => Workload::FillRandom,
        ("fill", Some(Order::Sequential)) => Workload::FillSequential,
        (_, Some(_)) => return Err(refuse("--order is for `fill` only")),
        ("fill-seq", None) => Workload::FillSequential,
        ("fill-sync", None) => Workload::FillSync,
        (_, None) => Workload::FillRandom,
    };
    let workload = match (cmd.sync, workload) {
        (false, w) => w,
        (true, Workload::FillSequential) => {
            return Err(refuse(
                "--sync inserts in random order: it does not go with --order seq (fill-seq)",
            ))
        }
        (true, _) => Workload::FillSync,
    };
    let run = &cmd.workload.run;
    if workload == Workload::FillSync {
        for (given, name) in
            [(run.threads.is_some(), "--threads"), (run.tasks.is_some(), "--tasks")]
        {
            if given {
                return Err(refuse(&format!(
                    "{name} does not apply to `fill --sync`: its concurrency is --committers N \
                     (threads, or Ferrite's tasks spread over --workers)"
                )));
            }
        }
    } else if cmd.committers.is_some() {
        return Err(refuse(
            "--committers is for `fill --sync` (the other workloads: --threads, or Ferrite's \
             --workers and --tasks)",
        ));
    }
    let mut config = workload_config(workload, cmd.workload).map_err(|mut e| {
        e.command.clone_from(&command);
        e
    })?;
    if let Some(committers) = cmd.committers {
        config.committers = committers;
    }
    Ok(config)
}

/// Applies the options shared by the workloads and `compare` to `config`.
fn run_config(
    command: &str,
    run: &RunOpts,
    mut config: RunConfig,
) -> Result<RunConfig, UsageError> {
    let refuse = |message: String| refuse(command, message);
    if let Some(dir) = &run.dir {
        config.dir.clone_from(dir);
    }
    if let Some(records) = run.records {
        if records > u64::MAX / 4 {
            return Err(refuse(format!(
                "--records: {records} is out of range (1 to {})",
                u64::MAX / 4
            )));
        }
        config.records = records;
    }
    if let Some(cache_mib) = run.cache_mib {
        config.cache_mib = cache_mib;
    }
    if let Some(mib) = run.change_buffer_mib {
        if mib >= config.cache_mib {
            return Err(refuse(format!(
                "--change-buffer-mib: {mib} leaves nothing of the {} MiB cache for the pool's \
                 frames",
                config.cache_mib
            )));
        }
        if config.store != StoreKind::Ferrite {
            return Err(refuse(
                "--change-buffer-mib is for --store ferrite (the peers' write buffers are \
                 theirs)"
                    .into(),
            ));
        }
        config.change_buffer_mib = Some(mib);
    }
    if let Some(seconds) = run.seconds {
        config.seconds = seconds;
    }
    if let Some(threads) = run.threads {
        config.threads = threads;
    }
    if let Some(workers) = run.workers {
        config.workers = workers;
    }
    if let Some(tasks) = run.tasks {
        if !(1..=1 << 16).contains(&tasks) {
            return Err(refuse(format!("--tasks: {tasks} is out of range (1 to 65536)")));
        }
        config.tasks = tasks;
    }
    config.direct_api = run.direct_api;
    if config.direct_api && config.store != StoreKind::Ferrite {
        return Err(refuse(
            "--direct-api is for --store ferrite (the peers always use threads)".into(),
        ));
    }
    if let Some(distribution) = run.distribution {
        config.distribution = distribution;
    }
    config.rate = run.rate.or(config.rate);
    if let Some(seed) = run.seed {
        config.seed = seed;
    }
    config.keep = run.keep;
    config.direct_io = run.direct_io;
    config.ceiling = run.ceiling;
    if let Some(theta) = run.theta {
        config.theta = theta;
    }
    config.disk_cap = run.disk_cap.cap();
    if let Some(tier) = run.tier.config(config.cache_mib) {
        let flags = &run.tier;
        match config.store {
            StoreKind::Ferrite if flags.rocksdb_tier.is_some() => {
                return Err(refuse("--rocksdb-tier is for --store rocksdb".into()));
            }
            StoreKind::Ferrite => {}
            StoreKind::RocksDb => {
                let ferrite_only = [
                    (flags.tier_admission.is_some(), "--tier-admission"),
                    (flags.tier_filter.is_some(), "--tier-filter"),
                    (flags.tier_latency_ns.is_some(), "--tier-latency-ns"),
                    (flags.tier_medium.is_some(), "--tier-medium"),
                ];
                if let Some((_, name)) = ferrite_only.iter().find(|(given, _)| *given) {
                    return Err(refuse(format!(
                        "{name} is for Ferrite's tier (RocksDB's tiers admit blocks their \
                         own way, on their own medium)"
                    )));
                }
            }
            store => return Err(refuse(no_tier(store))),
        }
        config.tier = Some(tier);
    }
    Ok(config)
}

/// Why `store` cannot have a tier.
fn no_tier(store: StoreKind) -> String {
    format!("--tier: {} has no second cache tier (ferrite and rocksdb have)", store.name())
}

/// `bench compare SUITE`: its [`CompareArgs`].
fn compare_args(cmd: CompareCmd) -> Result<CompareArgs, UsageError> {
    let mut base = RunConfig::new(Workload::Lookup, StoreKind::Ferrite);
    base.dir = PathBuf::from("ferrite-data/compare");
    let base = run_config("bench compare", &cmd.run, base)?;
    let stores =
        cmd.stores.unwrap_or_else(|| StoreKind::ALL.into_iter().filter(|s| s.built_in()).collect());
    if base.tier.is_some() {
        let untiered = [StoreKind::WiredTiger, StoreKind::Lmdb];
        if let Some(store) = stores.iter().find(|s| untiered.contains(s)) {
            return Err(refuse("bench compare", no_tier(*store) + "; choose --stores"));
        }
    }
    let serve = ServeSweep {
        value_size: cmd.value_size.map_or(1024, |b| b as usize),
        get_percent: cmd.mix.unwrap_or(90),
        rates: cmd.rates.map(|r| r.into_iter().map(|ops| ops as f64).collect()),
    };
    let serve_only = cmd.value_size.is_some() || cmd.mix.is_some() || serve.rates.is_some();
    if serve_only && cmd.suite != "serve" {
        return Err(refuse(
            "bench compare",
            "--value-size, --mix and --rates apply to the serve suite only",
        ));
    }
    if cmd.warehouses.is_some() && cmd.suite != "tpcc" {
        return Err(refuse("bench compare", "--warehouses applies to the tpcc suite only"));
    }
    if cmd.reduced_scale && cmd.suite != "tpcc" {
        return Err(refuse("bench compare", "--reduced-scale applies to the tpcc suite only"));
    }
    // (Regression: `compare tpcc --rounds 3` ran one round, silently.)
    if cmd.rounds > 1 && matches!(cmd.suite.as_str(), "tpcc" | "serve") {
        return Err(refuse(
            "bench compare",
            format!(
                "--rounds does not apply to the {} suite (it runs once; repeat the command \
                 for more runs)",
                cmd.suite
            ),
        ));
    }
    let warehouses = cmd.warehouses.map_or(1, |w| w as u16);
    Ok(CompareArgs {
        suite: cmd.suite,
        out: cmd.out,
        base,
        stores,
        rounds: cmd.rounds,
        serve,
        warehouses,
        reduced_scale: cmd.reduced_scale,
    })
}

/// `bench io`: its [`IoBenchConfig`].
fn io_config(cmd: IoCmd) -> Result<IoBenchConfig, UsageError> {
    let defaults = IoBenchConfig::default();
    let config = IoBenchConfig {
        file: cmd.file.unwrap_or(defaults.file),
        engines: cmd.engine.unwrap_or(defaults.engines),
        pattern: cmd.pattern.unwrap_or(defaults.pattern),
        bs: cmd.bs.unwrap_or(defaults.bs),
        depth: cmd.depth.unwrap_or(defaults.depth),
        threads: cmd.threads.unwrap_or(defaults.threads),
        seconds: cmd.seconds.unwrap_or(defaults.seconds),
        size_mib: cmd.size_mib.unwrap_or(defaults.size_mib),
        direct: !cmd.no_direct,
        keep: cmd.keep,
        use_fio: defaults.use_fio,
    };
    config.validate().map_err(|e| refuse("bench io", e.to_string()))?;
    Ok(config)
}

/// `bench serve`: its [`ServeConfig`].
fn serve_bench_config(cmd: ServeBenchCmd) -> Result<ServeConfig, UsageError> {
    let store = cmd.store.unwrap_or(ServeStore::Ferrite);
    let defaults = ServeConfig::new(store);
    let config = ServeConfig {
        store,
        server: cmd.server,
        dir: cmd.dir.unwrap_or(defaults.dir),
        memory_mib: cmd.memory_mib.unwrap_or(defaults.memory_mib),
        disk_budget_mib: cmd.disk_budget_mib,
        keys: cmd.keys.unwrap_or(defaults.keys),
        value_size: cmd.value_size.map_or(defaults.value_size, |b| b as usize),
        get_percent: cmd.mix.unwrap_or(defaults.get_percent),
        zipfian: matches!(cmd.distribution, Some(Distribution::Zipfian)),
        theta: cmd.theta.unwrap_or(defaults.theta),
        rate: cmd.rate,
        connections: cmd.connections.unwrap_or(defaults.connections),
        seconds: cmd.seconds.unwrap_or(defaults.seconds),
        seed: cmd.seed.unwrap_or(defaults.seed),
        json: cmd.json,
        durability: durability_of(cmd.durability.as_deref()),
        client: cmd.client.unwrap_or(defaults.client),
        multiget: cmd.multiget.unwrap_or(defaults.multiget),
        herd: cmd.herd,
        tier: cmd.tier.config(cmd.memory_mib.unwrap_or(defaults.memory_mib)),
    };
    // A herd is GETs only: the default mix gives way to it (a mix asked for is refused).
    let config = match (cmd.herd, cmd.mix) {
        (true, None) => ServeConfig { get_percent: 100, ..config },
        _ => config,
    };
    if cmd.durability.is_some() && (store != ServeStore::Ferrite || cmd.server.is_some()) {
        return Err(refuse(
            "bench serve",
            "--durability is for the ferrite serve the run starts (not --server, not memcached)",
        ));
    }
    if cmd.tier.rocksdb_tier.is_some() {
        return Err(refuse("bench serve", "--rocksdb-tier is for --store rocksdb"));
    }
    if cmd.theta.is_some() && !config.zipfian {
        return Err(refuse("bench serve", "--theta is for --distribution zipfian"));
    }
    if config.tier.is_some() && (store != ServeStore::Ferrite || cmd.server.is_some()) {
        return Err(refuse(
            "bench serve",
            "--tier is for the ferrite serve the run starts (not --server, not memcached)",
        ));
    }
    config.validate().map_err(|e| refuse("bench serve", e.to_string()))?;
    Ok(config)
}

/// `serve`: its [`ServeArgs`].
/// `--durability sync|periodic|none` (periodic: every 100 ms); sync when not given.
fn durability_of(text: Option<&str>) -> ferrite::Durability {
    match text {
        Some("none") => ferrite::Durability::None,
        Some("periodic") => ferrite::Durability::Periodic(std::time::Duration::from_millis(100)),
        _ => ferrite::Durability::Sync,
    }
}

fn serve_args(cmd: ServeCmd) -> ServeArgs {
    let durability = durability_of(cmd.durability.as_deref());
    ServeArgs {
        db: cmd.db,
        listen: cmd.listen.unwrap_or_else(|| std::net::SocketAddr::from(([127, 0, 0, 1], 11211))),
        memory_mib: cmd.memory_mib.unwrap_or(256),
        disk_budget_mib: cmd.disk_budget_mib,
        store_mode: cmd.mode.as_deref() == Some("store"),
        workers: cmd.workers,
        max_connections: cmd.max_connections.unwrap_or(1024),
        item_max_mib: cmd.item_max_mib.unwrap_or(1),
        idle_timeout_secs: cmd.idle_timeout_secs.unwrap_or(0),
        authfile: cmd.authfile,
        durability,
        backup_dir: cmd.backup_dir,
        tier: cmd.tier.map(|path| {
            let memory_mib = cmd.memory_mib.unwrap_or(256);
            ferrite::TierOptions {
                admission: admission_of(cmd.tier_admission.as_deref()),
                medium: medium_of(cmd.tier_medium.as_deref()),
                filter: filter_of(cmd.tier_filter.as_deref()),
                ..ferrite::TierOptions::new(path, cmd.tier_mib.unwrap_or(2 * memory_mib) << 20)
            }
        }),
    }
}

/// `bench objects`: its [`ObjectsConfig`].
fn objects_config(cmd: ObjectsCmd) -> Result<ObjectsConfig, UsageError> {
    let store = cmd.store.unwrap_or(ObjectStoreKind::Ferrite);
    let defaults = ObjectsConfig::new(store);
    let config = ObjectsConfig {
        store,
        pattern: cmd.pattern.unwrap_or(defaults.pattern),
        block_bytes: cmd.block.unwrap_or(defaults.block_bytes),
        objects: cmd.objects.unwrap_or(defaults.objects),
        object_mib: cmd.object_mib.unwrap_or(defaults.object_mib),
        depth: cmd.depth.unwrap_or(defaults.depth),
        direct_api: cmd.direct_api,
        seconds: cmd.seconds.unwrap_or(defaults.seconds),
        sync: cmd.sync,
        dir: cmd.dir.unwrap_or(defaults.dir),
        keep: cmd.keep,
        cache_mib: cmd.cache_mib.unwrap_or(defaults.cache_mib),
        seed: cmd.seed.unwrap_or(defaults.seed),
        json: cmd.json,
        ops_per_thread: None,
    };
    // The combinations only the benchmark knows (enough data for the depth, the peers).
    config.validate().map_err(|e| refuse("bench objects", e.to_string()))?;
    Ok(config)
}

/// `bench recovery`: its [`RecoveryConfig`].
fn recovery_config(cmd: RecoveryCmd) -> Result<RecoveryConfig, UsageError> {
    let defaults = RecoveryConfig::default();
    let config = RecoveryConfig {
        dir: cmd.dir.unwrap_or(defaults.dir),
        seconds: cmd.seconds.unwrap_or(defaults.seconds),
        committers: cmd.committers.unwrap_or(defaults.committers),
        workers: cmd.workers.unwrap_or(defaults.workers),
        cache_mib: cmd.cache_mib.unwrap_or(defaults.cache_mib),
        checkpoint_bytes: cmd.checkpoint_mib.map_or_else(
            || default_checkpoint_bytes(cmd.cache_mib.unwrap_or(defaults.cache_mib)),
            |mib| mib << 20,
        ),
        direct_io: cmd.direct_io,
        keep: cmd.keep,
        json: cmd.json,
    };
    config.validate().map_err(|e| refuse("bench recovery", e.to_string()))?;
    Ok(config)
}

/// `bench tpcc`: its [`TpccConfig`].
fn tpcc_config(cmd: TpccCmd) -> Result<TpccConfig, UsageError> {
    let defaults = TpccConfig::default();
    let config = TpccConfig {
        store: cmd.store.unwrap_or(defaults.store),
        dir: cmd.dir.unwrap_or(defaults.dir),
        warehouses: cmd.warehouses.map_or(defaults.warehouses, |w| w as u16),
        reduced: cmd.reduced_scale,
        cache_mib: cmd.cache_mib.unwrap_or(defaults.cache_mib),
        seconds: cmd.seconds.unwrap_or(defaults.seconds),
        workers: cmd.workers.unwrap_or(defaults.workers),
        checkpoint_bytes: cmd.checkpoint_mib.map(|mib| mib << 20),
        terminals_per_warehouse: cmd
            .terminals_per_warehouse
            .map_or(defaults.terminals_per_warehouse, |n| n as u32),
        affinity: cmd.affinity.unwrap_or(defaults.affinity),
        spec_times: cmd.spec_times,
        sync: cmd.sync,
        no_log: cmd.no_log,
        seed: cmd.seed.unwrap_or(defaults.seed),
        keep: cmd.keep,
        direct_io: cmd.direct_io,
        json: cmd.json,
        check_only: cmd.check,
        disk_cap: cmd.disk_cap.cap(),
    };
    config.validate().map_err(|e| refuse("bench tpcc", e))?;
    Ok(config)
}

/// The `clap` command, for completions and tests.
pub fn command() -> clap::Command {
    Cli::command()
}

#[cfg(test)]
mod tests;
