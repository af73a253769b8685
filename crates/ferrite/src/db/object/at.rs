//! Objects read through a snapshot (`Snapshot::get`, and its scans): the value an object's
//! stub named when the snapshot was taken, though writes, merges, truncations and deletes
//! have changed it since.
//!
//! Everything an object is made of but its data pages lives in trees, which the snapshot
//! reads as they were: the stub (in its key's tree), the extents and the fragment-log
//! entries (in the objects tree). Data pages are never written in place (whole blocks go to
//! new pages, the rest to fragments), so the pages the old extents name hold the old bytes
//! for as long as none of them is written again; an explicit snapshot pins the epoch of
//! freed runs before it takes its moment (`Held::take`), so no run freed after it is reused
//! until it is dropped, as a reader of extent maps pins one for a read.
//!
//! The fragment log is ordered by entry, not by object: the snapshot scans it once, on its
//! first object read, and keeps which entries lie over which block of which object
//! ([`FragmentLogAt`]); each read then fetches the entries over its blocks by key.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use super::format::{self, decode_stub, log_key, Extent, BLOCK, ENTRY_HEAD, KIND_EXTENT};
use super::ops::{corrupt, overlay_entries, MapView};
use crate::db::snapshot::Held;
use crate::db::Tree;
use crate::error::{Error, Result};
use crate::sched::block_on;

/// The fragment log as of a snapshot: `(object, block)` → its entries' numbers, oldest
/// first.
#[derive(Debug, Default)]
pub(in crate::db) struct FragmentLogAt {
    entries: BTreeMap<(u64, u64), Vec<u64>>,
}

/// Blocks read at a time (as `read_object_async`).
const SPAN: u64 = 256;

impl FragmentLogAt {
    /// Reads the fragment log of `objects` as of `held`.
    pub(in crate::db) fn read(held: &Arc<Held>, objects: &Tree) -> Result<FragmentLogAt> {
        let shared = held.shared();
        let mut entries: BTreeMap<(u64, u64), Vec<u64>> = BTreeMap::new();
        let (low, high) = (log_key(0).to_vec(), log_key(u64::MAX).to_vec());
        let scan =
            objects.scan_at(Bound::Included(low), Bound::Included(high), false, Some(held.clone()));
        for entry in scan {
            let (key, value) = entry?;
            let (_, _, seq) = format::parse_key(&key).expect("a key of the range");
            if value.len() < ENTRY_HEAD {
                return Err(corrupt(
                    shared,
                    format!("fragment entry {seq}: {} bytes", value.len()),
                ));
            }
            let owner = u64::from_le_bytes(value[..8].try_into().unwrap());
            let block = u64::from_le_bytes(value[8..16].try_into().unwrap());
            entries.entry((owner, block)).or_default().push(seq);
        }
        Ok(FragmentLogAt { entries })
    }
}

/// The whole value of the object whose stub is `stub`, as of snapshot `held` (blocking
/// reads: not inside a task).
pub(in crate::db) fn read_object_at(held: &Arc<Held>, stub: &[u8]) -> Result<Vec<u8>> {
    let shared = held.shared();
    let Some((id, len)) = decode_stub(stub).map_err(|r| corrupt(shared, r))? else {
        unreachable!("a stub");
    };
    let len = usize::try_from(len).map_err(|_| Error::ValueTooLarge {
        len: usize::MAX,
        max: super::MAX_OBJECT_LEN as usize,
    })?;
    let mut value = vec![0u8; len];
    if len == 0 {
        return Ok(value);
    }
    let objects = shared.objects_tree(false)?.ok_or_else(|| {
        corrupt(shared, format!("object {id} is named, and there are no objects"))
    })?;
    let last = (len as u64 - 1) / BLOCK;
    let view = map_at(held, &objects, id, last)?;
    let mut data = Vec::new();
    let mut block = 0;
    while block <= last {
        let end = (block + SPAN - 1).min(last);
        data.resize(((end - block + 1) * BLOCK) as usize, 0);
        shared.read_blocks(&view, block, end, &mut data)?;
        let from = (block * BLOCK) as usize;
        let to = (((end + 1) * BLOCK) as usize).min(len);
        value[from..to].copy_from_slice(&data[..to - from]);
        block = end + 1;
    }
    // Nothing read through an ended snapshot counts (its old pages may be gone).
    held.check()?;
    Ok(value)
}

/// Object `id`'s map over blocks `0..=last` as of `held`.
fn map_at(held: &Arc<Held>, objects: &Tree, id: u64, last: u64) -> Result<MapView> {
    let shared = held.shared();
    let mut view = MapView::default();
    let low = format::key(id, KIND_EXTENT, 0).to_vec();
    let high = format::key(id, KIND_EXTENT, u64::MAX).to_vec();
    for entry in
        objects.scan_at(Bound::Included(low), Bound::Included(high), false, Some(held.clone()))
    {
        let (key, value) = entry?;
        let (_, _, end) = format::parse_key(&key).expect("a key of the range");
        let extent = Extent::decode(end, &value)
            .map_err(|r| corrupt(shared, format!("object {id}: {r}")))?;
        if extent.first > last {
            break;
        }
        view.extents.push(extent);
    }
    let log = held.fragment_log(objects)?;
    for (&(_, block), seqs) in log.entries.range((id, 0)..=(id, last)) {
        let fetch = |key: &[u8]| block_on(held.get_raw(objects, key));
        view.fragments.insert(block, overlay_entries(shared, id, block, seqs, fetch)?);
    }
    Ok(view)
}
