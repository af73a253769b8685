//! Descents of several keys at once, a level at a time, with the nodes each goes to next
//! prefetched into the CPU's caches while the others go down (after the group prefetching
//! of Chen, Ailamaki, Gibbons and Mowry, "Improving Hash Join Performance through
//! Prefetching", ICDE 2004, applied to tree descents).
//!
//! In memory, a lookup's time is its cache misses: a node's entry in the translation table,
//! its header, its fences, the slots its search reads. One descent takes them one after
//! another, each waiting for the one before. Taken together, the misses of all the keys'
//! nodes at one level are in flight at once: each pass over the keys asks for the next
//! lines of every key's node and only then reads the ones asked for in the pass before. At
//! the leaves, a pass asks for the lines of each key's entry, which the lookup then copies
//! (TPC-C in memory, three pairs: +0.8 to +1.5 % transactions/s).
//!
//! Nothing here decides anything: [`BTree::descend_step`] reads and validates nodes exactly
//! as a lookup does, and the prefetches are hints. A descent this stops (a miss, a restart,
//! anything unexpected) is left where it is, for [`BTree::get_resuming`] to go on from.

use super::probe::Probe;
use super::tree::{BTree, Resume};
use crate::buffer::BufferPool;
use crate::error::PageId;

/// Levels taken down at most: more than any tree has ([`super::node::MAX_LEVEL`]).
const MAX_ROUNDS: usize = super::node::MAX_LEVEL as usize + 1;

/// Takes the descents of `rows` (a tree and a key each; `None`: not this row) down to their
/// leaves together, leaving each row's `resumes[i]` at its leaf (or wherever it stopped),
/// for `BTree::get_resuming` to end the lookup there. Worth it for a few rows and more;
/// never wrong for fewer.
pub fn descend_together(
    pool: &BufferPool,
    rows: &[Option<(BTree, &[u8])>],
    resumes: &mut [Resume],
) {
    debug_assert_eq!(rows.len(), resumes.len());
    let mut going: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].is_some()).collect();
    let mut next: Vec<(usize, PageId)> = Vec::with_capacity(going.len());
    for _ in 0..MAX_ROUNDS {
        if going.is_empty() {
            return;
        }
        next.clear();
        // Each row a level down, its child's table entry asked for.
        for &i in &going {
            let Some((tree, key)) = rows[i] else { continue };
            if let Ok(Some(child)) = tree.descend_step(pool, key, &mut resumes[i]) {
                pool.prefetch_entry(child);
                next.push((i, child));
            }
        }
        // The entries asked for first have arrived by now: the children's headers.
        for &(_, child) in &next {
            if let Some(view) = pool.peek(child) {
                view.prefetch(0);
                view.prefetch(64);
            }
        }
        // And then what each search reads beyond its child's header.
        for &(i, child) in &next {
            if let (Some(view), Some((_, key))) = (pool.peek(child), rows[i]) {
                Probe::new(view).prefetch_search(key);
            }
        }
        going.clear();
        going.extend(next.iter().map(|&(i, _)| i));
    }
}
