//! The catalog: an ordinary B+tree (tree id 0, root page 2) mapping each tree's name to its
//! root page and tree id (see `docs/design.md`, "Catalog"). Creating and dropping trees are
//! commits like any other; opening one reads the catalog.

use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::cursor::Cursor;
use super::iter::next_blocking;
use super::{Db, Shared, Tree, MAX_TREE_NAME_LEN};
use crate::btree::node::{Node, Payload};
use crate::btree::BTree;
use crate::buffer::BufferPool;
use crate::error::{Error, PageId, Result};
use crate::format::page::read_u64;
use crate::io::AlignedPage;
use crate::sched::{block_on, run_async, run_async_with};

fn check_tree_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        "names must not be empty"
    } else if name.len() > MAX_TREE_NAME_LEN {
        "names are at most 255 bytes"
    } else if name.starts_with('\0') {
        "names beginning with a NUL byte are Ferrite's own"
    } else {
        return Ok(());
    };
    Err(Error::BadTreeName { name: name.to_owned(), reason })
}

fn encode_entry(tree: BTree) -> [u8; 16] {
    let mut entry = [0u8; 16];
    entry[..8].copy_from_slice(&tree.root.to_le_bytes());
    entry[8..].copy_from_slice(&tree.tree_id.to_le_bytes());
    entry
}

fn decode_entry(bytes: &[u8]) -> Option<BTree> {
    (bytes.len() == 16).then(|| BTree { root: read_u64(bytes, 0), tree_id: read_u64(bytes, 8) })
}

/// A consistent copy of page `page_id`, loaded if need be (which verifies it).
pub(super) async fn read_page(pool: &BufferPool, page_id: PageId) -> Result<AlignedPage> {
    let mut copy = AlignedPage::zeroed();
    run_async(pool, |_| pool.read_copy(page_id, &mut copy)).await?;
    Ok(copy)
}

impl Db {
    /// Creates tree `name`; `Error::TreeExists` if it exists.
    pub fn create_tree(&self, name: &str) -> Result<Tree> {
        check_tree_name(name)?;
        let btree = self.shared.create_tree_named(name, false)?;
        Ok(self.shared.handle(name, btree))
    }

    /// Opens tree `name`; `Error::TreeNotFound` if there is none.
    pub fn open_tree(&self, name: &str) -> Result<Tree> {
        self.shared.check_open()?;
        check_tree_name(name)?;
        let _guard = self.shared.catalog_lock.lock().unwrap();
        match self.shared.lookup_tree(name)? {
            Some(btree) => Ok(self.shared.handle(name, btree)),
            None => Err(Error::TreeNotFound { name: name.to_owned() }),
        }
    }

    /// Opens tree `name`, creating it if need be.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let options = ferrite::Options { workers: 0, pool_bytes: 16 << 20, ..Default::default() };
    /// # let db = ferrite::Db::open(dir.path(), options)?;
    /// let users = db.tree("users")?; // created: there was none
    /// users.put("ada", "Ada Lovelace")?;
    /// let same = db.tree("users")?; // opened: another handle to the same tree
    /// assert_eq!(same.get("ada")?.as_deref(), Some(&b"Ada Lovelace"[..]));
    /// assert!(db.open_tree("groups").is_err()); // (`open_tree` creates nothing)
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tree(&self, name: &str) -> Result<Tree> {
        match self.open_tree(name) {
            Err(Error::TreeNotFound { .. }) => match self.create_tree(name) {
                Err(Error::TreeExists { .. }) => self.open_tree(name),
                other => other,
            },
            other => other,
        }
    }

    /// Removes tree `name` and frees its pages. Handles to it fail with `TreeNotFound` after.
    pub fn drop_tree(&self, name: &str) -> Result<()> {
        let shared = &self.shared;
        shared.check_writable()?;
        check_tree_name(name)?;
        let _guard = shared.catalog_lock.lock().unwrap();
        let Some(btree) = shared.lookup_tree(name)? else {
            return Err(Error::TreeNotFound { name: name.to_owned() });
        };
        let pool = &shared.pool;
        let catalog = shared.catalog;
        let key = name.as_bytes();
        shared.blocking_write(shared.commit(shared.durability, async || {
            // Its objects go with it: their stubs are read under the commit lock, so an
            // object a writer commits up to the drop goes too (and a writer after it finds
            // the tree dropped).
            let objects = shared.object_ids_of(btree)?;
            for &id in &objects {
                shared.free_object(id).await?;
            }
            let (_, merge) =
                run_async_with(pool, false, |scratch| catalog.delete(pool, key, scratch)).await?;
            if let Some(leaf) = merge {
                run_async_with(pool, false, |scratch| catalog.try_merge(pool, leaf, key, scratch))
                    .await?;
            }
            if let Some(flag) = shared.dropped_flags.lock().unwrap().remove(&btree.tree_id) {
                flag.store(true, Ordering::Release);
            }
            for key in shared.change_buffer.keys_of(btree.tree_id) {
                shared.change_buffer.stage_remove(btree.tree_id, &key);
            }
            shared.free_tree_pages(btree).await
        }))
    }

    /// The names of all trees, in order.
    pub fn tree_names(&self) -> Result<Vec<String>> {
        self.shared.check_open()?;
        let entries = self.shared.catalog_entries()?.into_iter();
        Ok(entries.map(|(name, _)| name).filter(|name| !name.starts_with('\0')).collect())
    }
}

impl Shared {
    /// Every catalog entry: name and tree (`None` when malformed).
    pub(super) fn catalog_entries(&self) -> Result<Vec<(String, Option<BTree>)>> {
        let mut cursor = Cursor::new(self.catalog, Bound::Unbounded, Bound::Unbounded, false);
        let mut entries = Vec::new();
        while let Some((key, value)) =
            next_blocking(&mut cursor, &self.pool, || Ok(())).map_err(|e| self.catalog_error(e))?
        {
            let name = String::from_utf8_lossy(&key).into_owned();
            entries.push((name, decode_entry(&value)));
        }
        Ok(entries)
    }

    /// An error reading the catalog: the catalog is never dropped, so where a tree would be
    /// "not found" (its root is not a node of it) the catalog's root page is damaged.
    pub(super) fn catalog_error(&self, e: Error) -> Error {
        match e {
            Error::TreeNotFound { .. } => Error::Corrupt {
                page: self.catalog.root,
                file: self.pool.file().path().to_owned(),
                reason: "the catalog's root page is not a node of the catalog".into(),
            },
            e => e,
        }
    }

    /// A handle on `btree`; the caller holds the catalog lock.
    pub(super) fn handle(self: &Arc<Self>, name: &str, btree: BTree) -> Tree {
        let mut flags = self.dropped_flags.lock().unwrap();
        let dropped = Arc::clone(flags.entry(btree.tree_id).or_default());
        Tree { shared: Arc::clone(self), btree, name: name.into(), dropped }
    }

    /// The tree named `name`, if the catalog has it.
    pub(super) fn lookup_tree(&self, name: &str) -> Result<Option<BTree>> {
        let pool = &self.pool;
        let catalog = self.catalog;
        let entry = block_on(run_async(pool, |scratch| {
            catalog.get(pool, name.as_bytes(), scratch, &mut |bytes: &[u8]| bytes.to_vec())
        }))
        .map_err(|e| self.catalog_error(e))?;
        match entry {
            None => Ok(None),
            Some(bytes) => decode_entry(&bytes).map(Some).ok_or_else(|| Error::Corrupt {
                page: catalog.root,
                file: pool.file().path().to_owned(),
                reason: format!("catalog entry for {name:?} is malformed"),
            }),
        }
    }

    /// Frees every page of a tree already removed from the catalog, root first, so that
    /// handles still in use fail cleanly instead of reading reused pages.
    async fn free_tree_pages(&self, btree: BTree) -> Result<()> {
        let pool = &self.pool;
        let mut pending = vec![btree.root];
        while let Some(page_id) = pending.pop() {
            let copy = read_page(pool, page_id).await?;
            let node = Node::new(copy.bytes());
            if node.tree_id() != btree.tree_id {
                return Err(crate::btree::check::corrupt(
                    pool,
                    page_id,
                    "not a node of the dropped tree".into(),
                ));
            }
            if node.is_leaf() {
                for slot in 0..node.count() {
                    if let Payload::OutOfLine { page: value_page, .. } = node.value(slot) {
                        pool.free_by_id(value_page)?;
                    }
                }
            } else {
                pending.extend((0..=node.count()).map(|i| node.child(i)));
            }
            pool.free_by_id(page_id)?;
        }
        Ok(())
    }
}

impl Shared {
    /// Creates tree `name` (checked by the caller). If it exists: the tree if `or_open`, else
    /// `Error::TreeExists`. The lookup and the creation are one hold of the catalog lock, so
    /// two callers racing to make a tree never both make it.
    pub(super) fn create_tree_named(self: &Arc<Self>, name: &str, or_open: bool) -> Result<BTree> {
        let shared = self;
        shared.check_writable()?;
        let _guard = shared.catalog_lock.lock().unwrap();
        match shared.lookup_tree(name)? {
            Some(btree) if or_open => return Ok(btree),
            Some(_) => return Err(Error::TreeExists { name: name.to_owned() }),
            None => {}
        }
        let pool = &shared.pool;
        let catalog = shared.catalog;
        let btree = shared.blocking_write(shared.commit(shared.durability, async || {
            let tree_id = shared.next_tree_id.fetch_add(1, Ordering::AcqRel);
            let btree = {
                let mut root = pool.allocate()?;
                let root_id = root.page_id();
                BTree::init_root(root.page_mut(), root_id, tree_id);
                BTree { root: root_id, tree_id }
            };
            let entry = encode_entry(btree);
            run_async_with(pool, false, |scratch| {
                catalog.put(pool, name.as_bytes(), &entry, scratch)
            })
            .await?;
            Ok(btree)
        }))?;
        Ok(btree)
    }
}
