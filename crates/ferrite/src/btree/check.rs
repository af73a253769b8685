//! The structural checker behind `ferrite check`: walks a tree from its root and verifies
//! every node (`Node::check`: order, fences, prefix, heads, hints, space accounting), that
//! each child's fences are exactly the separators around it in its parent, that levels step
//! down by one, and that every page is reached once. Checksums and node structure
//! (`Node::validate`) are verified as pages load.

use crate::btree::node::{Expect, Node, Payload};
use crate::btree::BTree;
use crate::buffer::BufferPool;
use crate::error::{Error, PageId, Result};
use crate::format::page::{self, PageKind};
use crate::format::value;
use crate::io::AlignedPage;

/// What a walk saw.
#[derive(Debug, Default, Clone)]
#[non_exhaustive]
pub struct TreeReport {
    /// Inner (branch) nodes.
    pub inner_pages: u64,
    /// Leaves.
    pub leaf_pages: u64,
    /// Value pages (the overflow of values longer than a leaf holds).
    pub value_pages: u64,
    /// Keys in the leaves.
    pub keys: u64,
    /// Entries of the tree waiting in the change buffer (a new key, or a newer value of a
    /// key in a leaf): not in `keys` until drained into their leaves.
    pub buffered: u64,
    /// Levels from the root to the leaves (1: the root is a leaf).
    pub depth: u16,
    /// Every fault found, each naming its page.
    pub faults: Vec<String>,
}

/// Marks which pages a walk reached, to find pages reached twice and pages never reached.
#[derive(Debug)]
pub struct PageMap {
    owner: Vec<u8>,
}

/// What a page is used for, in a [`PageMap`]: nothing found yet.
pub const UNUSED: u8 = 0;
/// A page a walk reached (a node, a Value page, an extent's page, a superblock).
pub const USED: u8 = 1;
/// A page on a free list.
pub const FREE: u8 = 2;

impl PageMap {
    /// A map of `page_count` pages, none reached yet.
    pub fn new(page_count: u64) -> Self {
        PageMap { owner: vec![UNUSED; page_count as usize] }
    }
    /// Records a use of `page_id`; returns a fault if it is out of range or used already.
    pub fn claim(&mut self, page_id: PageId, as_what: u8) -> Option<String> {
        match self.owner.get_mut(page_id as usize) {
            None => Some(format!("page {page_id} is beyond the page count")),
            Some(slot) if *slot != UNUSED => Some(format!(
                "page {page_id} is {} and also {}",
                describe(*slot),
                describe(as_what)
            )),
            Some(slot) => {
                *slot = as_what;
                None
            }
        }
    }
    /// Pages neither used nor free.
    pub fn lost(&self) -> Vec<PageId> {
        (0..self.owner.len() as u64).filter(|&id| self.owner[id as usize] == UNUSED).collect()
    }
}

fn describe(what: u8) -> &'static str {
    match what {
        USED => "in use",
        FREE => "free",
        _ => "unused",
    }
}

/// Reads a consistent copy of a page, loading it if need be (which verifies it).
pub type ReadPage<'a> = dyn FnMut(PageId) -> Result<AlignedPage> + 'a;

/// Walks `tree`, reading its pages with `read`, recording them in `pages`.
pub fn check_tree(read: &mut ReadPage<'_>, tree: BTree, pages: &mut PageMap) -> TreeReport {
    let mut report = TreeReport::default();
    walk(read, tree, tree.root, None, &[], &[], pages, &mut report);
    report
}

#[allow(clippy::too_many_arguments)]
fn walk(
    read: &mut ReadPage<'_>,
    tree: BTree,
    page_id: PageId,
    level: Option<u16>,
    lower: &[u8],
    upper: &[u8],
    pages: &mut PageMap,
    report: &mut TreeReport,
) {
    if let Some(fault) = pages.claim(page_id, USED) {
        report.faults.push(fault);
        return;
    }
    let copy = match read(page_id) {
        Ok(copy) => copy,
        Err(e) => {
            report.faults.push(e.to_string());
            return;
        }
    };
    let kind = page::kind_of(copy.bytes());
    if !matches!(kind, Some(PageKind::Leaf) | Some(PageKind::Inner)) {
        report.faults.push(format!("page {page_id}: expected a tree node, found {kind:?}"));
        return;
    }
    let node = Node::new(copy.bytes());
    let expect =
        Expect { page_id, tree_id: Some(tree.tree_id), level, fences: Some((lower, upper)) };
    if let Err(fault) = node.check(&expect) {
        report.faults.push(format!("page {page_id}: {fault}"));
        return;
    }
    if level.is_none() {
        report.depth = node.level() + 1;
    }
    if node.is_leaf() {
        report.leaf_pages += 1;
        report.keys += node.count() as u64;
        for slot in 0..node.count() {
            if let Payload::OutOfLine { page: value_page, tail } = node.value(slot) {
                check_value(read, tree, page_id, value_page, tail.len(), pages, report);
            }
        }
        return;
    }
    report.inner_pages += 1;
    let child_level = node.level().checked_sub(1);
    let Some(child_level) = child_level else {
        report.faults.push(format!("page {page_id}: inner node at level 0"));
        return;
    };
    let mut low = lower.to_vec();
    let mut high = Vec::new();
    for index in 0..=node.count() {
        if index < node.count() {
            node.key_into(index, &mut high);
        } else {
            high = upper.to_vec();
        }
        let child = node.child(index);
        walk(read, tree, child, Some(child_level), &low, &high, pages, report);
        std::mem::swap(&mut low, &mut high);
    }
}

fn check_value(
    read: &mut ReadPage<'_>,
    tree: BTree,
    leaf: PageId,
    value_page: PageId,
    tail: usize,
    pages: &mut PageMap,
    report: &mut TreeReport,
) {
    if let Some(fault) = pages.claim(value_page, USED) {
        report.faults.push(format!("leaf {leaf}: {fault}"));
        return;
    }
    match read(value_page) {
        Ok(copy) => match value::decode(copy.bytes(), tree.tree_id) {
            // A tail follows only a full page: a value is cut in one way.
            Ok(bytes) if tail > 0 && bytes.len() < value::PAGE_CAPACITY => report.faults.push(
                format!("value page {value_page}: {} bytes, and a tail of {tail}", bytes.len()),
            ),
            Ok(_) => report.value_pages += 1,
            Err(reason) => report.faults.push(format!("value page {value_page}: {reason}")),
        },
        Err(e) => report.faults.push(e.to_string()),
    }
}

/// A corruption error for page `page_id` of the pool's file.
pub fn corrupt(pool: &BufferPool, page_id: PageId, reason: String) -> Error {
    Error::Corrupt { page: page_id, file: pool.file().path().to_owned(), reason }
}
