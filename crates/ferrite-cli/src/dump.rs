//! `ferrite dump` and `ferrite load`: the entries of a data directory as lines of text, and
//! back, streamed both ways.
//!
//! The format and its codec are the engine's (`ferrite::dump`, where a table describes it):
//! this file streams a database through it, and loads batches of entries back, with
//! progress, syncs and errors that say how far a load got.

use std::io::{BufRead, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ferrite::dump::{self, Encoding, Line};
use ferrite::{Db, Durability, WriteBatch};
use ferrite_bench::Progress;

use crate::cli::{DumpArgs, LoadArgs};
use crate::common::{
    max_batch_entries, open, operate_then_close, Access, Change, CliError, Outcome, BATCH_BYTES,
};

/// A load syncs its log once per this many bytes of entries (and at its end): a failure part
/// way keeps all but the last few MiB, at a few syncs per GiB.
const SYNC_BYTES: usize = 32 << 20;
/// Inputs of this many bytes or more show a progress bar.
const BAR_BYTES: u64 = 64 << 20;

pub fn dump(args: &DumpArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    let db = open(&args.db, Access::ReadOnly)?;
    operate_then_close(db, &args.db.dir, |db| {
        let names = match &args.tree {
            Some(name) => vec![name.clone()],
            None => db.tree_names()?,
        };
        let encoding = if args.hex { Encoding::Hex } else { Encoding::Text };
        writeln!(out, "{}", dump::header_line(encoding))?;
        let mut counter = Counter::new("dumping");
        let mut line = String::new();
        for name in &names {
            // Opened before its line is written: a tree that does not exist fails the dump.
            let tree = db.open_tree(name)?;
            writeln!(out, "{}", dump::tree_line(name))?;
            for entry in tree.iter() {
                let (key, value) = entry?;
                line.clear();
                dump::push_entry(&mut line, &key, &value, encoding);
                out.write_all(line.as_bytes())?;
                counter.add(1);
            }
        }
        writeln!(out, "{}", dump::end_line(names.len() as u64, counter.done))?;
        out.flush()?;
        counter.finish();
        Ok((Outcome::Done, Change::Nothing("the dump".into())))
    })
}

/// What a load did, for its summary and for the error that stops it part way.
#[derive(Debug, Default)]
struct Loaded {
    entries: u64,
    trees: Vec<String>,
}

pub fn load(
    args: &LoadArgs,
    input: &mut dyn BufRead,
    input_bytes: Option<u64>,
) -> Result<Outcome, CliError> {
    let db = open(&args.db, Access::Create)?;
    let mut loaded = Loaded::default();
    let result = operate_then_close(db, &args.db.dir, |db| {
        let outcome = load_lines(db, args, input, input_bytes, &mut loaded);
        let change = match loaded.entries {
            0 => Change::Nothing("the load".into()),
            n => Change::Durable(format!("the load (its first {n} entries)")),
        };
        Ok((outcome, change))
    });
    match result? {
        Ok(()) if loaded.entries == 0 => {
            eprintln!("ferrite: the input holds no entries: nothing was loaded");
            Ok(Outcome::Done)
        }
        Ok(()) => {
            eprintln!(
                "ferrite: loaded {} entr{} into {} tree{} ({})",
                loaded.entries,
                if loaded.entries == 1 { "y" } else { "ies" },
                loaded.trees.len(),
                if loaded.trees.len() == 1 { "" } else { "s" },
                loaded.trees.iter().map(|t| format!("{t:?}")).collect::<Vec<_>>().join(", ")
            );
            Ok(Outcome::Done)
        }
        Err(e) => Err(e),
    }
}

/// Reads every line of `input` and commits its entries in batches, syncing one batch in
/// every [`SYNC_BYTES`] and the last, which makes every earlier one durable. On an error the
/// batches before it stay loaded and a last sync is tried: the error says how many entries
/// are durable (`loaded.entries`: the input's first ones, as batches commit in order).
///
/// Batches commit on a thread of their own, one at a time, while this one reads and decodes
/// the next: on two cores the decoding (a sixth of a sorted load's time) is hidden.
fn load_lines(
    db: &Db,
    args: &LoadArgs,
    input: &mut dyn BufRead,
    input_bytes: Option<u64>,
    loaded: &mut Loaded,
) -> Result<(), CliError> {
    std::thread::scope(|scope| {
        let (jobs, to_commit) = mpsc::sync_channel::<WriteBatch>(0);
        let (report, results) = mpsc::channel();
        scope.spawn(move || {
            for batch in to_commit {
                // (The batch is dropped here too, off the decoding thread.)
                if report.send(db.write(&batch)).is_err() {
                    break;
                }
            }
        });
        let mut loader = Loader::new(db, args, input_bytes, Committer::new(jobs, results));
        let outcome = loader.run(input);
        load_end(loader, outcome, loaded)
    })
}

/// The end of [`load_lines`]: the last batch, synced, and what the load kept.
fn load_end(
    mut loader: Loader<'_>,
    outcome: Result<(), CliError>,
    loaded: &mut Loaded,
) -> Result<(), CliError> {
    // A failed commit leaves the database refusing writes: this sync then fails too, and
    // only the batches synced before count.
    let synced = loader.commit(Durability::Sync).and_then(|()| loader.settle());
    *loaded = Loaded { entries: loader.durable, trees: std::mem::take(&mut loader.trees_loaded) };
    let unsynced = loader.committed - loader.durable;
    let stopped = |e: CliError| {
        let mut kept = match loaded.entries {
            0 => "nothing was loaded".to_owned(),
            1 => "the input's first entry was loaded and is durable".to_owned(),
            n => format!("the input's first {n} entries were loaded and are durable"),
        };
        if unsynced > 0 {
            kept += &format!(
                " (the {unsynced} after them were committed but could not be synced: a crash \
                 may keep or lose them)"
            );
        }
        CliError::Refused(format!("load: {e}; {kept}"))
    };
    outcome.map_err(stopped)?;
    synced.map_err(CliError::Engine)?;
    loader.counter.finish();
    Ok(())
}

struct Loader<'a> {
    db: &'a Db,
    args: &'a LoadArgs,
    /// Set by the header (a dump), else by `--hex`.
    encoding: Encoding,
    /// Whether the input is a dump (a header came first): `#` lines are directives then.
    dump: bool,
    /// The tree the next entries go into; `None` in a dump's tree that `--tree` skips.
    tree: Option<ferrite::Tree>,
    batch: WriteBatch,
    batch_entries: usize,
    batch_bytes: usize,
    max_batch_entries: usize,
    committed: u64,
    /// Entries of the batches up to the last one synced.
    durable: u64,
    bytes_since_sync: usize,
    trees_loaded: Vec<String>,
    /// Entries and trees the input held (skipped ones too), checked against `# end`.
    seen_entries: u64,
    seen_trees: u64,
    ended: bool,
    line: u64,
    key: Vec<u8>,
    value: Vec<u8>,
    counter: Counter,
    committer: Committer,
}

/// The committing thread of a load, as the decoding thread sees it: a batch handed over,
/// whose result is awaited before the next is handed over.
struct Committer {
    jobs: mpsc::SyncSender<WriteBatch>,
    results: mpsc::Receiver<ferrite::Result<()>>,
    /// The batch committing now: its entries, and whether it syncs.
    in_flight: Option<(usize, Durability)>,
}

impl Committer {
    fn new(
        jobs: mpsc::SyncSender<WriteBatch>,
        results: mpsc::Receiver<ferrite::Result<()>>,
    ) -> Self {
        Committer { jobs, results, in_flight: None }
    }
}

impl<'a> Loader<'a> {
    fn new(db: &'a Db, args: &'a LoadArgs, input_bytes: Option<u64>, committer: Committer) -> Self {
        Loader {
            db,
            args,
            encoding: if args.hex { Encoding::Hex } else { Encoding::Text },
            dump: false,
            tree: None,
            batch: WriteBatch::new(),
            batch_entries: 0,
            batch_bytes: 0,
            max_batch_entries: max_batch_entries(&args.db),
            committed: 0,
            durable: 0,
            bytes_since_sync: 0,
            trees_loaded: Vec::new(),
            seen_entries: 0,
            seen_trees: 0,
            ended: false,
            line: 0,
            key: Vec::new(),
            value: Vec::new(),
            counter: Counter::with_total("loading", input_bytes),
            committer,
        }
    }

    fn run(&mut self, input: &mut dyn BufRead) -> Result<(), CliError> {
        let mut line = Vec::with_capacity(64 << 10);
        let mut read = 0u64;
        loop {
            line.clear();
            let n = input
                .read_until(b'\n', &mut line)
                .map_err(|source| CliError::Input { from: "standard input".into(), source })?;
            if n == 0 {
                break;
            }
            read += n as u64;
            self.line += 1;
            if line.last() == Some(&b'\n') {
                line.pop();
            }
            self.take(&line).map_err(|e| match e {
                LineError::Format(what) => CliError::Refused(format!("line {}: {what}", self.line)),
                LineError::Engine(e) => CliError::Engine(e),
            })?;
            self.counter.set(read, self.committed + self.batch_entries as u64);
        }
        if self.line == 0 {
            return Ok(());
        }
        if self.dump && !self.ended {
            return Err(CliError::Refused(format!(
                "the dump ends after line {} without its `# end` line: it was cut short",
                self.line
            )));
        }
        Ok(())
    }

    /// Takes one line (without its newline).
    fn take(&mut self, line: &[u8]) -> Result<(), LineError> {
        if self.ended {
            return Err(LineError::Format("a line after the dump's `# end` line".into()));
        }
        let first = self.line == 1;
        let parsed =
            dump::parse_line(line, first, self.dump, self.encoding, &mut self.key, &mut self.value);
        match parsed.map_err(LineError::Format)? {
            Line::Header(encoding) => {
                (self.encoding, self.dump) = (encoding, true);
                Ok(())
            }
            Line::Tree(name) => {
                self.seen_trees += 1;
                if self.args.tree.as_ref().is_some_and(|only| *only != name) {
                    self.tree = None;
                    return Ok(());
                }
                self.start_tree(name)
            }
            Line::End { trees, entries } => {
                if (trees, entries) != (self.seen_trees, self.seen_entries) {
                    return Err(LineError::Format(format!(
                        "the dump says it holds `trees={trees} entries={entries}`, but it held \
                         `trees={} entries={}`: it is damaged",
                        self.seen_trees, self.seen_entries
                    )));
                }
                self.ended = true;
                Ok(())
            }
            Line::Entry => {
                if first {
                    // Plain lines: every one an entry of the tree --tree names.
                    let Some(name) = &self.args.tree else {
                        return Err(LineError::Format(
                            "the input has no `# ferrite dump` header, so it names no tree: \
                             give the tree its entries go into with --tree"
                                .into(),
                        ));
                    };
                    self.start_tree(name.clone())?;
                }
                self.entry()
            }
        }
    }

    fn start_tree(&mut self, name: String) -> Result<(), LineError> {
        // The open tree's handle stays valid in the pending batch.
        self.tree = Some(self.db.tree(&name).map_err(LineError::Engine)?);
        if !self.trees_loaded.contains(&name) {
            self.trees_loaded.push(name);
        }
        Ok(())
    }

    /// Adds the entry just decoded into `key` and `value`.
    fn entry(&mut self) -> Result<(), LineError> {
        if self.dump && self.seen_trees == 0 {
            return Err(LineError::Format("an entry before the dump's first `# tree` line".into()));
        }
        self.seen_entries += 1;
        if self.tree.is_none() {
            return Ok(()); // a tree --tree does not ask for
        }
        let bytes = self.key.len() + self.value.len();
        if self.batch_entries >= self.max_batch_entries || self.batch_bytes + bytes > BATCH_BYTES {
            let durability = match self.bytes_since_sync + self.batch_bytes >= SYNC_BYTES {
                true => Durability::Sync,
                false => Durability::None,
            };
            self.commit(durability).map_err(LineError::Engine)?;
        }
        let tree = self.tree.as_ref().expect("checked above");
        self.batch.put(tree, &self.key, &self.value);
        self.batch_entries += 1;
        self.batch_bytes += bytes;
        Ok(())
    }

    /// Hands the pending entries (if any) to the committing thread with `durability`, once
    /// the batch before has committed: an error is that batch's (or this one's, if the
    /// thread is gone).
    fn commit(&mut self, durability: Durability) -> ferrite::Result<()> {
        if self.batch_entries == 0 {
            return self.settle();
        }
        let mut batch = std::mem::take(&mut self.batch);
        batch.durability(durability);
        let entries = std::mem::take(&mut self.batch_entries);
        self.bytes_since_sync += std::mem::take(&mut self.batch_bytes);
        if durability == Durability::Sync {
            self.bytes_since_sync = 0;
        }
        self.settle()?;
        if self.committer.jobs.send(batch).is_err() {
            return Err(ferrite::Error::Closed); // the thread is gone (it panicked)
        }
        self.committer.in_flight = Some((entries, durability));
        Ok(())
    }

    /// Waits for the batch committing now, if any, and counts it loaded.
    fn settle(&mut self) -> ferrite::Result<()> {
        let Some((entries, durability)) = self.committer.in_flight.take() else { return Ok(()) };
        // Not committed on an error: these entries are not loaded.
        self.committer.results.recv().map_err(|_| ferrite::Error::Closed)??;
        self.committed += entries as u64;
        if durability == Durability::Sync {
            self.durable = self.committed;
        }
        Ok(())
    }
}

enum LineError {
    Format(String),
    Engine(ferrite::Error),
}

/// Progress of a dump or a load on stderr: a bar over the input's bytes where their number
/// is known (a load from a file), else a line a second with the entries so far.
struct Counter {
    label: &'static str,
    bar: Option<Progress>,
    done: u64,
    start: Instant,
    next_line: Duration,
}

impl Counter {
    fn new(label: &'static str) -> Self {
        Counter {
            label,
            bar: None,
            done: 0,
            start: Instant::now(),
            next_line: Duration::from_secs(1),
        }
    }

    fn with_total(label: &'static str, bytes: Option<u64>) -> Self {
        // Small inputs load in well under a second: no bar.
        let bar = bytes.filter(|&b| b >= BAR_BYTES).map(|b| Progress::stderr(label, "bytes", b));
        Counter { bar, ..Counter::new(label) }
    }

    /// `n` more entries done.
    fn add(&mut self, n: u64) {
        self.done += n;
        if self.done % 4096 == 0 {
            self.tick();
        }
    }

    /// `bytes` of the input read, `entries` done.
    fn set(&mut self, bytes: u64, entries: u64) {
        self.done = entries;
        match &mut self.bar {
            Some(bar) => bar.set(bytes),
            None if entries % 4096 == 0 => self.tick(),
            None => {}
        }
    }

    fn tick(&mut self) {
        let elapsed = self.start.elapsed();
        if elapsed >= self.next_line {
            eprintln!(
                "{}: {} entries, {:.0} entries/s",
                self.label,
                self.done,
                self.done as f64 / elapsed.as_secs_f64()
            );
            self.next_line = elapsed + Duration::from_secs(1);
        }
    }

    fn finish(&mut self) {
        if let Some(bar) = &mut self.bar {
            bar.finish();
        }
    }
}
