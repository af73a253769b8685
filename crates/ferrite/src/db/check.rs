//! `Db::check`: the walk behind `ferrite check` (every tree, page accounting, the change
//! buffer's entries, both superblock copies) and the log's verification.

use super::catalog::read_page;
use super::Db;
use crate::btree::check::{self, PageMap, TreeReport};
use crate::error::Result;
use crate::format::superblock::{NO_CHECKPOINT, SUPERBLOCK_PAGES};
use crate::sched::block_on;

/// What [`Db::check`] verified.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct CheckReport {
    /// Page ids handed out (the page file's logical size, in pages).
    pub page_count: u64,
    /// Of those, free (tree pages and object data pages).
    pub free_pages: u64,
    /// The catalog, the tree of trees.
    pub catalog: TreeReport,
    /// Every tree, by name, in name order (Ferrite's own trees, as its objects tree, named
    /// in parentheses).
    pub trees: Vec<(String, TreeReport)>,
    /// Objects: stubs, extent maps, fragments, and the pages extents own.
    pub objects: super::object::ObjectsReport,
    /// Faults outside any one tree (page accounting, catalog entries, change buffer entries
    /// of no tree).
    pub faults: Vec<String>,
}

impl CheckReport {
    /// Every fault found, anywhere.
    pub fn all_faults(&self) -> Vec<String> {
        let mut all = self.faults.clone();
        all.extend(self.catalog.faults.iter().cloned());
        all.extend(self.objects.faults.iter().cloned());
        for (name, report) in &self.trees {
            all.extend(report.faults.iter().map(|f| format!("tree {name:?}: {f}")));
        }
        all
    }

    /// Whether the check found no fault anywhere.
    pub fn is_ok(&self) -> bool {
        self.all_faults().is_empty()
    }
}

impl Db {
    /// Walks the catalog and every tree, verifying checksums, structure and page accounting
    /// (each page used once or free, none lost). Meant for a database nobody is changing.
    /// Pages not in memory are read from the disk, never from the second cache tier (a
    /// cache: what is checked is what the database holds), and are not copied into it.
    pub fn check(&self) -> Result<CheckReport> {
        crate::worker_context::without_tier(|| self.check_pages())
    }

    fn check_pages(&self) -> Result<CheckReport> {
        self.shared.check_open()?;
        let pool = &self.shared.pool;
        let page_count = pool.page_count();
        let mut pages = PageMap::new(page_count);
        let mut report = CheckReport { page_count, ..CheckReport::default() };
        for id in SUPERBLOCK_PAGES {
            pages.claim(id, check::USED);
        }
        if let Some(damage) = self.shared.superblock_damage.lock().unwrap().clone() {
            report.faults.push(damage);
        }
        let mut read = |page_id| block_on(read_page(pool, page_id));
        report.catalog = check::check_tree(&mut read, self.shared.catalog, &mut pages);
        let mut buffered = self.shared.change_buffer.counts_by_tree();
        let mut user_trees = Vec::new();
        match self.shared.catalog_entries() {
            Ok(entries) => {
                for (name, entry) in entries {
                    match entry {
                        Some(btree) => {
                            let mut tree_report = check::check_tree(&mut read, btree, &mut pages);
                            tree_report.buffered =
                                buffered.remove(&btree.tree_id).unwrap_or_default();
                            // Ferrite's own trees (names from a NUL) show by what they hold.
                            let shown = match name.strip_prefix('\0') {
                                Some(own) => format!("({own})"),
                                None => {
                                    user_trees.push((name.clone(), btree));
                                    name
                                }
                            };
                            report.trees.push((shown, tree_report));
                        }
                        None => report.faults.push(format!("catalog entry {name:?} is malformed")),
                    }
                }
            }
            Err(e) => report.faults.push(format!("reading the catalog failed: {e}")),
        }
        for (tree_id, entries) in buffered {
            report.faults.push(format!(
                "the change buffer holds {entries} entries of tree id {tree_id}, which no \
                 catalog entry names"
            ));
        }
        report.objects = self.shared.check_objects(&user_trees, &mut pages);
        let free = [pool.free_pages(), self.shared.object_space.free_pages()].concat();
        report.free_pages = free.len() as u64;
        for id in free {
            if let Some(fault) = pages.claim(id, check::FREE) {
                report.faults.push(fault);
            }
        }
        for id in pages.lost() {
            report.faults.push(format!("page {id} is neither in use nor free (lost)"));
        }
        Ok(report)
    }

    /// Verifies the log (read-only): every record a recovery would replay, from the last
    /// checkpoint's redo position to the end. `None` if the directory has no log yet.
    pub fn check_log(&self) -> Result<Option<crate::wal::recover::LogReport>> {
        self.shared.check_open()?;
        let checkpoint_lsn = self.shared.superblock.lock().unwrap().checkpoint_lsn;
        if checkpoint_lsn == NO_CHECKPOINT {
            return Ok(None);
        }
        crate::wal::recover::check_log(self.shared.storage.as_ref(), checkpoint_lsn).map(Some)
    }
}
