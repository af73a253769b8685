//! `Db::check` for objects: every stub names an object no other stub names; every entry of
//! the objects tree belongs to an object a stub names; extents lie inside their object,
//! are ordered and do not overlap, and no page belongs to two extents (or to an extent and
//! anything else); fragment-log entries decode, belong to an object, and leave no byte past
//! its length; the index in memory lists exactly the entries the tree holds.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use super::format::{self, decode_stub, Extent, Fragments, BLOCK, FRAGMENT_LOG, KIND_EXTENT};
use crate::btree::check::{PageMap, USED};
use crate::btree::BTree;
use crate::db::cursor::Cursor;
use crate::db::iter::next_blocking;
use crate::db::Shared;

/// What the check of objects found.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ObjectsReport {
    /// Objects (values stored as objects, each named by one stub).
    pub objects: u64,
    /// Extents (runs of whole pages) of all objects.
    pub extents: u64,
    /// Pages those extents hold.
    pub extent_pages: u64,
    /// Entries of the fragment log (small or unaligned writes not merged yet).
    pub fragments: u64,
    /// Every fault found, each naming its object.
    pub faults: Vec<String>,
}

impl Shared {
    /// Checks objects (see the module documentation); `trees` are the user trees.
    pub(crate) fn check_objects(
        self: &Arc<Self>,
        trees: &[(String, BTree)],
        pages: &mut PageMap,
    ) -> ObjectsReport {
        let mut report = ObjectsReport::default();
        let Ok(Some(objects)) = self.objects_tree(false) else { return report };
        // Stubs: object id to (tree, length).
        let mut stubs: HashMap<u64, (String, u64)> = HashMap::new();
        for (name, btree) in trees {
            let mut cursor = Cursor::new(*btree, Bound::Unbounded, Bound::Unbounded, false)
                .with_change_buffer(Arc::clone(&self.change_buffer));
            loop {
                match next_blocking(&mut cursor, &self.pool, || Ok(())) {
                    Ok(None) => break,
                    Err(e) => {
                        report.faults.push(format!("tree {name:?}: reading it failed: {e}"));
                        break;
                    }
                    Ok(Some((key, value))) => match decode_stub(&value) {
                        Ok(None) => {}
                        Err(reason) => report.faults.push(format!("tree {name:?}: {reason}")),
                        Ok(Some((id, len))) => {
                            if let Some((other, _)) = stubs.insert(id, (name.clone(), len)) {
                                report.faults.push(format!(
                                    "object {id} is named by two keys (trees {other:?} and \
                                     {name:?}, key {key:?})"
                                ));
                            }
                        }
                    },
                }
            }
        }
        report.objects = stubs.len() as u64;
        let mut last_extent: Option<(u64, u64)> = None;
        // Per (object, block): its entries overlaid in order, and their numbers.
        let mut overlays: BTreeMap<(u64, u64), (Fragments, Vec<u64>)> = BTreeMap::new();
        for entry in objects.iter() {
            let (key, value) = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    report.faults.push(format!("reading the objects tree failed: {e}"));
                    break;
                }
            };
            let Some((id, kind, index)) = format::parse_key(&key) else {
                report.faults.push(format!("objects tree: a key of {} bytes", key.len()));
                continue;
            };
            if id == FRAGMENT_LOG {
                report.fragments += 1;
                self.check_log_entry(index, &value, &stubs, &mut overlays, &mut report);
                continue;
            }
            let Some((_, len)) = stubs.get(&id) else {
                report.faults.push(format!("object {id} has entries but no key names it (lost)"));
                continue;
            };
            let blocks = len.div_ceil(BLOCK);
            match kind {
                KIND_EXTENT => {
                    let extent = match Extent::decode(index, &value) {
                        Ok(extent) => extent,
                        Err(reason) => {
                            report.faults.push(format!("object {id}: {reason}"));
                            continue;
                        }
                    };
                    report.extents += 1;
                    report.extent_pages += extent.blocks();
                    if extent.last >= blocks {
                        report.faults.push(format!(
                            "object {id}: an extent to block {} past its length {len}",
                            extent.last
                        ));
                    }
                    if let Some((prev_id, prev_last)) = last_extent {
                        if prev_id == id && extent.first <= prev_last {
                            report.faults.push(format!(
                                "object {id}: extents overlap at block {}",
                                extent.first
                            ));
                        }
                    }
                    last_extent = Some((id, extent.last));
                    for page in extent.page..extent.page + extent.blocks() {
                        if let Some(fault) = pages.claim(page, USED) {
                            report.faults.push(format!("object {id}: {fault}"));
                        }
                    }
                }
                other => report.faults.push(format!("object {id}: an entry of kind {other}")),
            }
        }
        // A truncation inside a block appends zeros up to the block's end (so the old bytes
        // never come back): bytes past the length are zeros, and none lie past the last block.
        for (&(id, block), (overlay, _)) in &overlays {
            let Some((_, len)) = stubs.get(&id) else { continue };
            let past_len = |(o, b): &(u16, Vec<u8>)| {
                let start = block * BLOCK + *o as u64;
                b.iter().enumerate().any(|(i, &x)| x != 0 && start + i as u64 >= *len)
            };
            if block >= len.div_ceil(BLOCK) || overlay.iter().any(past_len) {
                report.faults.push(format!(
                    "object {id}: fragments of block {block} hold bytes past its length {len}"
                ));
            }
        }
        // The index reads and merges trust: exactly the entries the tree holds.
        let index = self.object_space.fragments();
        let indexed: BTreeMap<(u64, u64), Vec<u64>> = index
            .by_object
            .iter()
            .flat_map(|(&id, blocks)| {
                blocks.iter().map(move |(&b, e)| ((id, b), e.iter().map(|x| x.0).collect()))
            })
            .collect();
        let stored: BTreeMap<(u64, u64), Vec<u64>> =
            overlays.into_iter().map(|(k, (_, seqs))| (k, seqs)).collect();
        if indexed != stored {
            let differ = indexed
                .keys()
                .chain(stored.keys())
                .find(|k| indexed.get(k) != stored.get(k))
                .copied();
            report.faults.push(format!(
                "the fragment index lists {} blocks, the log holds entries for {} (first \
                 difference: object and block {differ:?})",
                indexed.len(),
                stored.len()
            ));
        }
        report
    }

    /// Checks fragment-log entry `seq` and adds it to its block's overlay.
    fn check_log_entry(
        &self,
        seq: u64,
        value: &[u8],
        stubs: &HashMap<u64, (String, u64)>,
        overlays: &mut BTreeMap<(u64, u64), (Fragments, Vec<u64>)>,
        report: &mut ObjectsReport,
    ) {
        let (id, block, fragments) = match format::decode_log_entry(value) {
            Ok(entry) => entry,
            Err(reason) => {
                report.faults.push(format!("fragment entry {seq}: {reason}"));
                return;
            }
        };
        if !stubs.contains_key(&id) {
            report
                .faults
                .push(format!("fragment entry {seq} is of object {id}, which no key names (lost)"));
            return;
        }
        let (overlay, seqs) = overlays.entry((id, block)).or_default();
        for (offset, bytes) in &fragments {
            *overlay = format::overlay_fragment(overlay, *offset as usize, bytes);
        }
        seqs.push(seq);
    }
}
