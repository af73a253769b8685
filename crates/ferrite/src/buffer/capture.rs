//! What one commit changed, page by page, gathered while it runs and turned into its log
//! record when it ends (`wal::record`, kind commit).
//!
//! Only one commit runs at a time (the database's commit lock), so the pool keeps a single
//! capture. A page enters it on its first change in the commit, with a copy of its bytes
//! before the change (*changed*), as a page the commit allocated (*new*: logged against a
//! zeroed page), or as freed. A page first changed and then freed is just freed; a page freed
//! and allocated again is new. While a commit runs, every page it changed is *pinned* (a bit
//! in the pool's translation table), so no write-back takes it before its record is in the
//! log; `BufferPool::stamp` then gives it the record's LSN and unpins it.

use std::collections::HashMap;

use crate::error::PageId;
use crate::store::page::PAGE_SIZE;
use crate::wal::record::{diff_ranges, RecordWriter, KIND_COMMIT, OP_CHANGED, OP_FREED, OP_NEW};

#[derive(Debug)]
enum Change {
    Changed(Box<[u8]>),
    New,
    Freed,
}

/// The pages one commit changed.
#[derive(Debug, Default)]
pub struct Capture {
    index: HashMap<PageId, usize>,
    pages: Vec<(PageId, Change)>,
}

static ZERO_PAGE: [u8; PAGE_SIZE] = [0; PAGE_SIZE];

impl Capture {
    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    pub fn clear(&mut self) {
        self.index.clear();
        self.pages.clear();
    }

    fn entry(&mut self, page_id: PageId) -> Option<&mut Change> {
        let at = *self.index.get(&page_id)?;
        Some(&mut self.pages[at].1)
    }

    fn push(&mut self, page_id: PageId, change: Change) {
        self.index.insert(page_id, self.pages.len());
        self.pages.push((page_id, change));
    }

    /// Notes a change to `page_id`, whose bytes are `before`; returns whether it is the
    /// page's first in this commit (the caller then pins it).
    pub fn note_change(&mut self, page_id: PageId, before: &[u8]) -> bool {
        if self.index.contains_key(&page_id) {
            return false;
        }
        self.push(page_id, Change::Changed(before.into()));
        true
    }

    /// Notes that the commit allocated `page_id` (zeroed).
    pub fn note_new(&mut self, page_id: PageId) {
        match self.entry(page_id) {
            Some(change) => *change = Change::New,
            None => self.push(page_id, Change::New),
        }
    }

    /// Notes that the commit freed `page_id`.
    pub fn note_freed(&mut self, page_id: PageId) {
        match self.entry(page_id) {
            Some(change) => *change = Change::Freed,
            None => self.push(page_id, Change::Freed),
        }
    }

    /// Pages whose bytes the commit leaves (changed or new): they get the record's LSN.
    pub fn kept_pages(&self) -> impl Iterator<Item = PageId> + '_ {
        self.pages.iter().filter(|(_, c)| !matches!(c, Change::Freed)).map(|(id, _)| *id)
    }

    /// The commit record: `page(id)` gives a page's bytes now.
    pub fn encode<'a>(&self, next_tree_id: u64, page: impl Fn(PageId) -> &'a [u8]) -> Vec<u8> {
        let mut w = RecordWriter::new(KIND_COMMIT);
        w.u64(next_tree_id);
        w.u32(self.pages.len() as u32);
        let mut ranges = Vec::new();
        for (page_id, change) in &self.pages {
            ranges.clear();
            let op = match change {
                Change::Changed(before) => {
                    diff_ranges(before, page(*page_id), &mut ranges);
                    OP_CHANGED
                }
                Change::New => {
                    diff_ranges(&ZERO_PAGE, page(*page_id), &mut ranges);
                    OP_NEW
                }
                Change::Freed => OP_FREED,
            };
            w.page_entry(*page_id, op, &ranges);
        }
        w.bytes
    }
}

/// The page-image record of `page` (for a write-back after a checkpoint).
pub fn encode_image(page_id: PageId, page: &[u8]) -> Vec<u8> {
    let mut ranges = Vec::new();
    diff_ranges(&ZERO_PAGE, page, &mut ranges);
    let mut w = RecordWriter::new(crate::wal::record::KIND_IMAGE);
    w.u64(crate::store::page::lsn_of(page));
    w.page_entry(page_id, OP_NEW, &ranges);
    w.bytes
}
