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
use crate::format::page::PAGE_SIZE;
use crate::wal::record::{diff_spans, RecordWriter, KIND_COMMIT, OP_CHANGED, OP_FREED, OP_NEW};

#[derive(Debug)]
enum Change {
    Changed(Box<[u8]>),
    New,
    Freed,
}

/// The pages one commit changed.
#[derive(Debug, Default)]
pub struct Capture {
    /// Where each page is in `pages`, kept only once a commit has more than
    /// `LINEAR_PAGES` (most change one leaf or two: a scan of `pages` is cheaper).
    index: HashMap<PageId, usize>,
    pages: Vec<(PageId, Change)>,
    /// Page copies of earlier commits, reused for the next before-images.
    spare: Vec<Box<[u8]>>,
}

/// Pages a commit may change before `Capture` indexes them.
const LINEAR_PAGES: usize = 8;
/// Page copies kept for reuse between commits.
const SPARE_COPIES: usize = 16;

static ZERO_PAGE: [u8; PAGE_SIZE] = [0; PAGE_SIZE];

impl Capture {
    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    pub fn clear(&mut self) {
        self.index.clear();
        for (_, change) in self.pages.drain(..) {
            if let Change::Changed(copy) = change {
                if self.spare.len() < SPARE_COPIES {
                    self.spare.push(copy);
                }
            }
        }
    }

    fn position(&self, page_id: PageId) -> Option<usize> {
        if self.pages.len() <= LINEAR_PAGES {
            self.pages.iter().position(|(id, _)| *id == page_id)
        } else {
            self.index.get(&page_id).copied()
        }
    }

    fn entry(&mut self, page_id: PageId) -> Option<&mut Change> {
        let at = self.position(page_id)?;
        Some(&mut self.pages[at].1)
    }

    fn push(&mut self, page_id: PageId, change: Change) {
        self.pages.push((page_id, change));
        if self.pages.len() == LINEAR_PAGES + 1 {
            self.index.extend(self.pages.iter().enumerate().map(|(at, (id, _))| (*id, at)));
        } else if self.pages.len() > LINEAR_PAGES {
            self.index.insert(page_id, self.pages.len() - 1);
        }
    }

    /// Notes a change to `page_id`, whose bytes are `before`; returns whether it is the
    /// page's first in this commit (the caller then pins it).
    pub fn note_change(&mut self, page_id: PageId, before: &[u8]) -> bool {
        if self.position(page_id).is_some() {
            return false;
        }
        let copy = match self.spare.pop() {
            Some(mut copy) if copy.len() == before.len() => {
                copy.copy_from_slice(before);
                copy
            }
            _ => before.into(),
        };
        self.push(page_id, Change::Changed(copy));
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
        let mut spans = Vec::new();
        for (page_id, change) in &self.pages {
            let (op, before) = match change {
                Change::Changed(before) => (OP_CHANGED, &before[..]),
                Change::New => (OP_NEW, &ZERO_PAGE[..]),
                Change::Freed => {
                    w.page_entry_spans(*page_id, OP_FREED, &[], &[]);
                    continue;
                }
            };
            let now = page(*page_id);
            diff_spans(before, now, &mut spans);
            w.page_entry_spans(*page_id, op, now, &spans);
        }
        w.bytes
    }
}

/// The page-image record of `page` (for a write-back after a checkpoint).
pub fn encode_image(page_id: PageId, page: &[u8]) -> Vec<u8> {
    let mut spans = Vec::new();
    diff_spans(&ZERO_PAGE, page, &mut spans);
    let mut w = RecordWriter::new(crate::wal::record::KIND_IMAGE);
    w.u64(crate::format::page::lsn_of(page));
    w.page_entry_spans(page_id, OP_NEW, page, &spans);
    w.bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(fill: u8) -> Vec<u8> {
        vec![fill; PAGE_SIZE]
    }

    #[test]
    fn pages_are_noted_once_past_the_linear_scan_and_again_after_clear() {
        let mut capture = Capture::default();
        for round in 0..3u8 {
            // More pages than the linear scan covers, so the index takes over mid-commit.
            for id in 0..(3 * LINEAR_PAGES as u64) {
                assert!(capture.note_change(id * 7, &page(round)), "first change of {id}");
                assert!(!capture.note_change(id * 7, &page(99)), "second change of {id}");
            }
            capture.note_freed(7);
            capture.note_new(7);
            capture.note_freed(14 * 7);
            capture.note_new(1000);
            let kept: Vec<PageId> = capture.kept_pages().collect();
            assert_eq!(kept.len(), 3 * LINEAR_PAGES + 1 - 1, "all but the freed one, plus 1000");
            assert!(kept.contains(&7) && kept.contains(&1000) && !kept.contains(&(14 * 7)));
            // The before-images are the first ones (reused copies are overwritten).
            let now = page(round + 1);
            let record = capture.encode(1, |_| &now[..]);
            assert!(record.len() > crate::wal::record::RECORD_HEADER_SIZE);
            for (id, change) in &capture.pages {
                if let Change::Changed(before) = change {
                    assert!(before.iter().all(|&b| b == round), "page {id} before-image");
                }
            }
            capture.clear();
            assert!(capture.is_empty());
            assert!(capture.kept_pages().next().is_none());
        }
    }
}
