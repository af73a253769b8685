//! Page fuzzing with checksums recomputed: the mutations an outside tester makes to get past
//! the page checksum (r5 and eighteen others like it). A small data directory is built once
//! (a few thousand keys of three shapes, three levels, one value in twenty in a Value page);
//! each seeded case changes one to three bytes of one node of the tree (mostly in the header,
//! the slot array and the fences, where a change misleads the most; often anywhere in the
//! heap), reseals the page with the engine's own `seal`, opens the directory read-only, and
//! reads every original key, then scans forward and in reverse: all on a thread of its own
//! that must finish within 10 s.
//!
//! The oracle: no hang and no panic; each read either fails or answers; a scan that answers
//! is strictly ordered, a forward and a reverse scan that both answer agree, and every `get`
//! that answers agrees with every scan that answers. An answer may differ from what was
//! written only where a mutated byte lies inside that key's or value's own stored bytes:
//! its key suffix; its payload (the value, or the id of its Value page) and the slot's
//! payload word (length and out-of-line flag). Some such changes no check can see, so they
//! read as changed keys and values, not errors:
//! - a key byte changed so that the key still sorts between its neighbours and inside the
//!   fences, with the same head (a byte past the suffix's first four), is another valid key;
//! - a payload byte is another value, or the id of another Value page of the tree;
//! - the out-of-line flag flipped on an 8-byte payload makes a Value page's id read as an
//!   8-byte inline value, or the reverse (the page holds nothing that says which; `check`
//!   finds the Value page left unreferenced or referenced twice).
//!
//! Any other difference must be an error. The test prints how many cases and reads failed and
//! answered, and asserts that both happen often, so it cannot pass vacuously.
//!
//! `FERRITE_SEED=<n> cargo test --test page_fuzz -- --nocapture` replays case `n`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::{read_page_of, seeds, tiny, tree_nodes, tree_root, within, write_sealed_page};
use common::{Rng, TempDir};
use ferrite::btree::node::Node;
use ferrite::{Db, Error, Options, WriteBatch};

/// Keys in the tree.
const KEYS: u64 = 8_000;
/// Seeded cases: 1,500 took 15.7 s of a test build on two shared cores (the test prints its
/// time).
const CASES: u64 = 1_000;
/// Reads of one case must end within this.
const LIMIT: Duration = Duration::from_secs(10);

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
/// A scan's entries in ascending order, or its error as its `Debug` form.
type Scan = Result<Vec<(Vec<u8>, Vec<u8>)>, String>;

/// Three shapes, so that nodes have long prefixes, short ones and none, and heads that tie.
fn key(i: u64) -> Vec<u8> {
    match i % 3 {
        0 => format!("acct/{i:06}/balance").into_bytes(),
        1 => format!("item-{i:06}").into_bytes(),
        // An odd multiplier permutes the 32-bit numbers: distinct keys all over the space.
        _ => (i.wrapping_mul(2_654_435_761) % (1 << 32)).to_be_bytes().to_vec(),
    }
}

/// Mostly short values; one in twenty too large for its leaf (a Value page of its own).
fn value(i: u64) -> Vec<u8> {
    let len = if i % 20 == 0 { 2_000 + i as usize % 500 } else { 10 + i as usize % 90 };
    (0..len).map(|n| (i as usize * 31 + n) as u8).collect()
}

/// The directory, the tree's nodes (page id, level) with their original images, and what
/// the tree holds.
struct Fixture {
    dir: TempDir,
    nodes: Vec<(u64, u16)>,
    images: BTreeMap<u64, Vec<u8>>,
    model: Arc<Model>,
}

fn build() -> Fixture {
    let dir = TempDir::with_prefix("page-fuzz").unwrap();
    let model: Model = (0..KEYS).map(|i| (key(i), value(i))).collect();
    {
        let db = Db::open(dir.path(), tiny(4096)).unwrap();
        let tree = db.tree("fuzz").unwrap();
        for first in (0..KEYS).step_by(500) {
            let mut batch = WriteBatch::new();
            for i in first..(first + 500).min(KEYS) {
                batch.put(&tree, key(i), value(i));
            }
            db.write(&batch).unwrap();
        }
        db.close().unwrap();
    }
    let nodes = tree_nodes(dir.path(), tree_root(dir.path(), "fuzz"));
    let levels = nodes.iter().map(|&(_, level)| level).max().unwrap() + 1;
    assert!(levels >= 2, "a tree of inner nodes and leaves: {levels} levels");
    let images = nodes.iter().map(|&(id, _)| (id, read_page_of(dir.path(), id))).collect();
    Fixture { dir, nodes, images, model: Arc::new(model) }
}

/// The byte ranges of a page where a change misleads the most, for a node image.
fn interesting_ranges(page: &[u8]) -> Vec<(usize, usize)> {
    let u16_at = |at: usize| usize::from(u16::from_le_bytes([page[at], page[at + 1]]));
    let count = u16_at(40).min(397);
    let mut ranges = vec![(16, 124), (124, 124 + 10 * count)];
    for (offset, len) in [(u16_at(48), u16_at(50)), (u16_at(52), u16_at(54))] {
        if len > 0 {
            ranges.push((offset, offset + len));
        }
    }
    ranges.retain(|&(start, end)| start < end);
    ranges
}

/// Changes 1 to 3 bytes of `page` (never the checksum and flags, which `seal` rewrites);
/// returns where.
fn mutate(page: &mut [u8], rng: &mut Rng) -> BTreeSet<usize> {
    let heap_start = usize::from(u16::from_le_bytes([page[42], page[43]])).min(4095);
    let ranges = interesting_ranges(page);
    let mut at = BTreeSet::new();
    for _ in 0..1 + rng.below(3) {
        let (start, end) = if rng.below(5) < 3 {
            ranges[rng.below(ranges.len() as u64) as usize]
        } else {
            (heap_start, 4096)
        };
        let position = start + rng.below((end - start) as u64) as usize;
        let old = page[position];
        let new = match rng.below(4) {
            0 => old ^ (1 << rng.below(8)),
            1 => old.wrapping_add(1),
            2 => old.wrapping_sub(1),
            _ => rng.next_u64() as u8,
        };
        page[position] = if new == old { old ^ 0x80 } else { new };
        at.insert(position);
    }
    at
}

/// The original keys whose stored key bytes, and whose stored value bytes (the payload and
/// the slot's payload word), contain a mutated byte: those may read differently.
fn touched(page: &[u8], at: &BTreeSet<usize>) -> (BTreeSet<Vec<u8>>, BTreeSet<Vec<u8>>) {
    let node = Node::new(page);
    let (mut keys, mut values) = (BTreeSet::new(), BTreeSet::new());
    if !node.is_leaf() {
        return (keys, values); // separators are no one's keys
    }
    let u16_at = |at: usize| usize::from(u16::from_le_bytes([page[at], page[at + 1]]));
    for slot in 0..node.count() {
        let slot_at = 124 + 10 * slot;
        let offset = u16_at(slot_at + 4);
        let suffix_end = offset + u16_at(slot_at + 6);
        let payload_end = suffix_end + (u16_at(slot_at + 8) & 0x7fff);
        let mut key = Vec::new();
        node.key_into(slot, &mut key);
        if at.range(offset..suffix_end).next().is_some() {
            keys.insert(key.clone());
        }
        let payload_word = slot_at + 8..slot_at + 10;
        if at.range(suffix_end..payload_end).next().is_some()
            || at.range(payload_word).next().is_some()
        {
            values.insert(key);
        }
    }
    (keys, values)
}

/// What the reads of one case returned; an error as its `Debug` form (kind first).
#[derive(Debug)]
struct Reads {
    /// Per original key, in the model's order.
    gets: Vec<Result<Option<Vec<u8>>, String>>,
    forward: Scan,
    /// In ascending order (reversed from how the scan handed the entries out).
    reverse: Scan,
}

fn read_everything(dir: &Path, model: &Model) -> Reads {
    let options = Options {
        read_only: true,
        create_if_missing: false,
        workers: 0,
        direct_io: false,
        ..tiny(64)
    };
    let shown = |e: Error| format!("{e:?}");
    let db = Db::open(dir, options).expect("a read-only open reads no node of the tree");
    let tree = match db.open_tree("fuzz") {
        Ok(tree) => tree,
        Err(e) => {
            // Every read fails with the error that kept the tree from opening.
            let e = shown(e);
            let gets = model.keys().map(|_| Err(e.clone())).collect();
            return Reads { gets, forward: Err(e.clone()), reverse: Err(e) };
        }
    };
    let gets = model.keys().map(|key| tree.get(key).map_err(shown)).collect();
    let forward = tree.iter().collect::<Result<_, _>>().map_err(shown);
    let reverse = tree.iter_rev().collect::<Result<Vec<_>, _>>().map_err(shown);
    let reverse = reverse.map(|mut entries| {
        entries.reverse();
        entries
    });
    Reads { gets, forward, reverse }
}

/// Checks one case's reads against the oracle; `Err` says what is wrong.
fn judge(
    model: &Model,
    reads: &Reads,
    (keys, values): &(BTreeSet<Vec<u8>>, BTreeSet<Vec<u8>>),
) -> Result<(), String> {
    let mut scans = Vec::new();
    for (name, scan) in [("forward", &reads.forward), ("reverse", &reads.reverse)] {
        let Ok(entries) = scan else { continue };
        if !entries.windows(2).all(|pair| pair[0].0 < pair[1].0) {
            return Err(format!("the {name} scan is not strictly ordered"));
        }
        let scanned: Model = entries.iter().cloned().collect();
        for (key, want) in model {
            if keys.contains(key) {
                continue; // its key bytes changed: it may be gone, or be another key
            }
            match scanned.get(key) {
                None => return Err(format!("the {name} scan lacks {key:?}")),
                Some(got) if got != want && !values.contains(key) => {
                    return Err(format!("the {name} scan has a wrong value for {key:?}"))
                }
                Some(_) => {}
            }
        }
        let new = scanned.keys().filter(|key| !model.contains_key(*key)).count();
        if new > keys.len() {
            return Err(format!("the {name} scan has {new} keys never written"));
        }
        scans.push(scanned);
    }
    if let (Ok(forward), Ok(reverse)) = (&reads.forward, &reads.reverse) {
        if forward != reverse {
            return Err("the forward and the reverse scan differ".into());
        }
    }
    for ((key, want), got) in model.iter().zip(&reads.gets) {
        let Ok(got) = got else { continue };
        let may_differ = keys.contains(key) || values.contains(key);
        match got {
            None if !keys.contains(key) => return Err(format!("get {key:?}: not found")),
            Some(got) if got != want && !may_differ => {
                return Err(format!("get {key:?}: a wrong value"))
            }
            _ => {}
        }
        if scans.iter().any(|scan| scan.get(key) != got.as_ref()) {
            return Err(format!("get {key:?} and a scan disagree"));
        }
    }
    Ok(())
}

/// Counts over all cases, printed at the end.
#[derive(Debug, Default)]
struct Counts {
    cases: u64,
    /// Cases where every read answered, all as written / some differently (where the
    /// mutation touched a key's or value's own bytes).
    answered_as_written: u64,
    answered_with_changes: u64,
    /// Cases where some read failed.
    some_failed: u64,
    reads_answered: u64,
    reads_failed: u64,
    /// Failed reads by error kind.
    errors: BTreeMap<String, u64>,
}

impl Counts {
    fn add(&mut self, model: &Model, reads: &Reads) {
        self.cases += 1;
        let errors: Vec<&String> = (reads.gets.iter().map(|r| r.as_ref().err()))
            .chain([reads.forward.as_ref().err(), reads.reverse.as_ref().err()])
            .flatten()
            .collect();
        self.reads_failed += errors.len() as u64;
        self.reads_answered += (reads.gets.len() + 2 - errors.len()) as u64;
        for error in &errors {
            let kind = error.split([' ', '{', '(']).next().unwrap_or_default();
            *self.errors.entry(kind.to_string()).or_default() += 1;
        }
        if !errors.is_empty() {
            self.some_failed += 1;
            return;
        }
        let scanned_as_written = |scan: &Scan| {
            scan.as_ref().is_ok_and(|s| s.iter().map(|(k, v)| (k, v)).eq(model.iter()))
        };
        let as_written = scanned_as_written(&reads.forward)
            && scanned_as_written(&reads.reverse)
            && (model.values().zip(&reads.gets))
                .all(|(want, got)| matches!(got, Ok(Some(got)) if got == want));
        if as_written {
            self.answered_as_written += 1;
        } else {
            self.answered_with_changes += 1;
        }
    }
}

#[test]
fn mutated_nodes_with_valid_checksums_fail_or_read_right() {
    let fixture = build();
    let inner: Vec<u64> =
        fixture.nodes.iter().filter(|&&(_, level)| level > 0).map(|&(id, _)| id).collect();
    let leaves: Vec<u64> =
        fixture.nodes.iter().filter(|&&(_, level)| level == 0).map(|&(id, _)| id).collect();
    let started = std::time::Instant::now();
    let mut counts = Counts::default();
    let replaying = std::env::var("FERRITE_SEED").is_ok();
    for seed in seeds(CASES) {
        let mut rng = Rng::new(seed);
        // A third of the cases hit inner nodes, which are few but lead everywhere.
        let pages = if rng.below(3) == 0 { &inner } else { &leaves };
        let page_id = pages[rng.below(pages.len() as u64) as usize];
        let original = &fixture.images[&page_id];
        let mut page = original.clone();
        let at = mutate(&mut page, &mut rng);
        let touched = touched(original, &at);
        write_sealed_page(fixture.dir.path(), page_id, &mut page);
        let (dir, model) = (fixture.dir.path().to_owned(), Arc::clone(&fixture.model));
        let what = format!("case {seed} (page {page_id}, bytes {at:?})");
        let reads = within(LIMIT, &what, move || read_everything(&dir, &model));
        if let Err(fault) = judge(&fixture.model, &reads, &touched) {
            panic!("{what}: {fault}");
        }
        counts.add(&fixture.model, &reads);
        if replaying {
            let failed = reads.gets.iter().filter(|get| get.is_err()).count();
            let (forward, reverse) = (reads.forward.as_ref().err(), reads.reverse.as_ref().err());
            println!("{what}: {failed} gets failed; forward {forward:?}; reverse {reverse:?}");
        }
        write_sealed_page(fixture.dir.path(), page_id, &mut original.clone());
    }
    println!(
        "{} cases in {:.1} s over {} inner nodes and {} leaves: {counts:#?}",
        counts.cases,
        started.elapsed().as_secs_f64(),
        inner.len(),
        leaves.len()
    );
    if counts.cases == CASES {
        // Not vacuous: mutations are caught often, and many leave every read answering
        // (changes in free space or in the page LSN, or in a key's or value's own bytes).
        assert!(counts.some_failed >= CASES / 2, "{counts:?}");
        assert!(counts.answered_with_changes >= CASES / 20, "{counts:?}");
        assert!(counts.answered_as_written >= 1, "{counts:?}");
    }
}
