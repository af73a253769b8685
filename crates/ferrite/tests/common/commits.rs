//! The commits the crash tests of real processes make (`sigkill.rs`, `powercut.rs`): a
//! function of a seed and a commit's number, so that the parent knows what the child wrote
//! from the numbers it acknowledged. 40 % are single puts, 10 % single `write_at`s (a
//! piece of up to 6 KiB at any offset of a value: aligned blocks, unaligned fragments, a
//! plain value turned into an object), 15 % single deletes, the rest batches of 2 to 8 puts
//! and deletes over three trees; values are of every size (some on Value pages, some
//! objects) and start with their commit's number, so that a stale one is recognisable.

use std::collections::BTreeMap;

use super::Rng;
use ferrite::btree::node::MAX_INLINE_ENTRY;
use ferrite::{Db, Tree, WriteBatch, MAX_VALUE_LEN};

/// The trees the commits change.
pub const TREES: [&str; 3] = ["t0", "t1", "t2"];

/// Tree index and key → value.
pub type State = BTreeMap<(usize, Vec<u8>), Vec<u8>>;

#[derive(Debug, Clone)]
pub enum Change {
    Put(usize, Vec<u8>, Vec<u8>),
    Delete(usize, Vec<u8>),
    /// `Tree::write_at(key, offset, bytes)`: never in a batch.
    WriteAt(usize, Vec<u8>, u64, Vec<u8>),
}

/// One call into the engine: a single put or delete, or a batch ([`Db::write`]).
#[derive(Debug, Clone)]
pub struct Commit {
    pub batch: bool,
    pub changes: Vec<Change>,
}

fn value(rng: &mut Rng, number: u64) -> Vec<u8> {
    let len = match rng.below(100) {
        0..=54 => rng.below(120) as usize,
        55..=79 => 120 + rng.below(1_400) as usize,
        // Longer than a leaf keeps inline: on a Value page.
        80..=95 => {
            MAX_INLINE_ENTRY + 1 + rng.below((MAX_VALUE_LEN - MAX_INLINE_ENTRY) as u64) as usize
        }
        // Longer than a Value page: an object (extents written before the commit).
        _ => MAX_VALUE_LEN + 1 + rng.below(40_000) as usize,
    };
    // The commit's number first, so that a stale value is recognisable in a failure.
    let mut value = number.to_le_bytes().to_vec();
    value.extend(rng.bytes(len.saturating_sub(8)));
    value.truncate(len);
    value
}

fn change(
    rng: &mut Rng,
    number: u64,
    delete_percent: u64,
    key: &mut impl FnMut(&mut Rng) -> Vec<u8>,
) -> Change {
    let tree = rng.below(TREES.len() as u64) as usize;
    let key = key(rng);
    if rng.below(100) < delete_percent {
        Change::Delete(tree, key)
    } else {
        Change::Put(tree, key, value(rng, number))
    }
}

/// Commit `number`, drawn from `rng` (seeded by the caller from the seed and the number),
/// its keys from `key`.
pub fn commit(rng: &mut Rng, number: u64, mut key: impl FnMut(&mut Rng) -> Vec<u8>) -> Commit {
    match rng.below(100) {
        0..=39 => Commit { batch: false, changes: vec![change(rng, number, 0, &mut key)] },
        40..=49 => {
            let tree = rng.below(TREES.len() as u64) as usize;
            let key = key(rng);
            let offset = rng.below((MAX_VALUE_LEN + 40_000) as u64);
            let len = 1 + rng.below(6_000) as usize;
            let mut bytes = number.to_le_bytes().to_vec();
            bytes.extend(rng.bytes(len.saturating_sub(8)));
            bytes.truncate(len);
            Commit { batch: false, changes: vec![Change::WriteAt(tree, key, offset, bytes)] }
        }
        50..=64 => Commit { batch: false, changes: vec![change(rng, number, 100, &mut key)] },
        _ => {
            let len = 2 + rng.below(7);
            let changes = (0..len).map(|_| change(rng, number, 30, &mut key)).collect();
            Commit { batch: true, changes }
        }
    }
}

/// `state` after `commit`.
pub fn apply(state: &mut State, commit: &Commit) {
    for change in &commit.changes {
        match change {
            Change::Put(tree, key, value) => {
                state.insert((*tree, key.clone()), value.clone());
            }
            Change::Delete(tree, key) => {
                state.remove(&(*tree, key.clone()));
            }
            Change::WriteAt(tree, key, offset, bytes) => {
                let value = state.entry((*tree, key.clone())).or_default();
                let (at, end) = (*offset as usize, *offset as usize + bytes.len());
                if value.len() < end {
                    value.resize(end, 0);
                }
                value[at..end].copy_from_slice(bytes);
            }
        }
    }
}

/// Makes `commit` on `trees` (opened in `TREES` order): a `WriteBatch` or a single call.
pub fn run_commit(db: &Db, trees: &[Tree], commit: &Commit) -> ferrite::Result<()> {
    if commit.batch {
        let mut batch = WriteBatch::new();
        for change in &commit.changes {
            match change {
                Change::Put(tree, key, value) => batch.put(&trees[*tree], key, value),
                Change::Delete(tree, key) => batch.delete(&trees[*tree], key),
                Change::WriteAt(..) => unreachable!("write_at is never batched"),
            };
        }
        return db.write(&batch);
    }
    match &commit.changes[0] {
        Change::Put(tree, key, value) => trees[*tree].put(key, value),
        Change::Delete(tree, key) => trees[*tree].delete(key).map(drop),
        Change::WriteAt(tree, key, offset, bytes) => trees[*tree].write_at(key, *offset, bytes),
    }
}

/// How `have` differs from `want`, shortly (keys shown to `key_chars` bytes).
pub fn difference(have: &State, want: &State, key_chars: usize) -> String {
    let mut lines = vec![format!("{} entries, the model has {}", have.len(), want.len())];
    let show = |(tree, key): &(usize, Vec<u8>)| {
        format!("{}:{}", TREES[*tree], String::from_utf8_lossy(&key[..key.len().min(key_chars)]))
    };
    let number = |v: &[u8]| v.get(..8).map(|b| u64::from_le_bytes(b.try_into().unwrap()));
    for (k, v) in have {
        match want.get(k) {
            None => lines.push(format!("extra {} (from commit {:?})", show(k), number(v))),
            Some(w) if w != v => lines.push(format!(
                "{} has commit {:?}'s value, the model commit {:?}'s",
                show(k),
                number(v),
                number(w)
            )),
            Some(_) => {}
        }
    }
    for (k, w) in want.iter().filter(|(k, _)| !have.contains_key(*k)) {
        lines.push(format!("missing {} (commit {:?}'s value)", show(k), number(w)));
    }
    lines.truncate(12);
    lines.join("\n  ")
}
