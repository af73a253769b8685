//! Ferrite's objects as a store for `bench objects`: every object a value of tree `objects`
//! (keys `obj-000001`, ...), written and read in place with `Tree::write_at_async` /
//! `read_at_async` by tasks on the database's workers (the default: each task one I/O at a
//! time, the data going through its worker's ring), or with `Tree::write_at` / `read_at`
//! through the blocking API from the run's threads (`tasks` off: no workers). Aligned 4 KiB blocks are copied on write to new extents, smaller or
//! unaligned pieces are logged as fragments and merged later: the layout note after a run
//! counts both.
//!
//! Durability: `Durability::Sync` with `--sync` (a write returns once durable), else
//! `Durability::None` (the log is written when its buffer fills and at checkpoints), as the
//! other workloads run.

use std::path::Path;

use ferrite::{Db, Durability, ObjectSpaceStats, Options, Tree};

use super::{object_name, ObjectSession, ObjectStore, ObjectStoreOptions};
use crate::error::BenchError;
use crate::stores::StoreError;

/// The tree holding the objects.
pub const TREE: &str = "objects";

/// A Ferrite database and its tree of objects.
#[derive(Debug)]
pub struct FerriteObjects {
    db: Db,
    tree: Tree,
    objects: u32,
    /// Opened for tasks (with workers).
    tasks: bool,
    description: String,
    /// The merges' work when the store began to settle: what the background merge did
    /// during the run (its warm-up included), apart from the settle's own merging.
    merged_in_run: std::sync::Mutex<Option<ObjectSpaceStats>>,
}

/// The options Ferrite opens with for `options`.
pub fn ferrite_options(options: &ObjectStoreOptions) -> Options {
    let defaults = Options::default();
    let data_bytes = u64::from(options.objects) * options.object_bytes;
    Options {
        pool_bytes: options.cache_bytes,
        direct_io: true,
        create_if_missing: true,
        // Tasks run on the workers (as many as the default: one per core); the blocking
        // calls need none.
        workers: if options.tasks {
            std::env::var("XW").ok().and_then(|v| v.parse().ok()).unwrap_or(defaults.workers)
        } else {
            0
        },
        durability: if options.sync { Durability::Sync } else { Durability::None },
        // Room for the objects three times over (copies on write, fragments), at least the
        // default.
        max_size_bytes: data_bytes.saturating_mul(3).clamp(defaults.max_size_bytes, 1 << 46),
        ..defaults
    }
}

impl FerriteObjects {
    pub fn open(dir: &Path, options: &ObjectStoreOptions) -> Result<Self, BenchError> {
        let opts = ferrite_options(options);
        let description = format!(
            "ferrite: objects are values of tree \"{TREE}\" (keys obj-NNNNNN) written and read \
             in place {}; workers={}, pool_bytes={} (4 KiB frames), direct_io={}, \
             durability={}, io_depth={}, grow_chunk_bytes={}, max_size_bytes={}, \
             log_segment_bytes={}, {}, change_buffer_bytes={}",
            if options.tasks {
                "(Tree::write_at_async/read_at_async) by tasks on the workers"
            } else {
                "(Tree::write_at/read_at) through the blocking API from the run's threads"
            },
            opts.workers,
            opts.pool_bytes,
            opts.direct_io,
            match opts.durability {
                Durability::Sync => "Sync (a write returns once durable)".to_owned(),
                Durability::None => "None (writes not synced)".to_owned(),
                other => format!("{other:?}"),
            },
            opts.io_depth,
            opts.grow_chunk_bytes,
            opts.max_size_bytes,
            opts.log_segment_bytes,
            crate::stores::ferrite::checkpoint_description(&opts),
            opts.change_buffer_bytes.map_or("default".to_owned(), |b| b.to_string()),
        );
        let db = Db::open(dir, opts)?;
        let tree = db.tree(TREE)?;
        let merged_in_run = std::sync::Mutex::new(None);
        Ok(FerriteObjects {
            db,
            tree,
            objects: options.objects,
            tasks: options.tasks,
            description,
            merged_in_run,
        })
    }
}

impl ObjectStore for FerriteObjects {
    fn name(&self) -> &'static str {
        "ferrite"
    }

    fn direct_io(&self) -> bool {
        true
    }

    fn describe(&self) -> String {
        self.description.clone()
    }

    fn create(&self, _object: u32) -> Result<(), StoreError> {
        // An object is created by its first write (the setup writes it from offset 0 on).
        Ok(())
    }

    fn session(&self) -> Result<Box<dyn ObjectSession + '_>, StoreError> {
        Ok(Box::new(FerriteSession { tree: self.tree.clone() }))
    }

    /// Merges every fragment into whole blocks, then writes every page back.
    fn settle(&self) -> Result<(), StoreError> {
        self.merged_in_run.lock().unwrap().get_or_insert(self.db.object_space_stats());
        self.db.merge_fragments()?;
        Ok(self.db.checkpoint()?)
    }

    fn layout_note(&self) -> Option<String> {
        let (mut extents, mut pages, mut fragments, mut fragment_bytes) = (0, 0, 0, 0);
        for object in 0..self.objects {
            let stat = self.tree.object_stat(object_name(object).as_bytes()).ok()??;
            extents += stat.extents;
            pages += stat.extent_pages;
            fragments += stat.fragments;
            fragment_bytes += stat.fragment_bytes;
        }
        let mut note = format!(
            "ferrite: {extents} extents of {pages} pages in all, {fragments} blocks with \
             fragments not merged yet ({fragment_bytes} bytes)"
        );
        if let Some(run) = *self.merged_in_run.lock().unwrap() {
            let all = self.db.object_space_stats();
            note += &format!(
                "; the background merge rewrote {} blocks during the run (warm-up included), \
                 reading {} of them from the device, and the settle {} more",
                run.merged_blocks,
                run.merge_reads,
                all.merged_blocks - run.merged_blocks
            );
        }
        Some(note)
    }

    fn task_api(&self) -> Option<(&Db, &Tree)> {
        self.tasks.then_some((&self.db, &self.tree))
    }

    fn close(self: Box<Self>) -> Result<(), StoreError> {
        Ok(self.db.close()?)
    }
}

/// A clone of the tree: `Tree` is shared by any number of threads.
struct FerriteSession {
    tree: Tree,
}

impl ObjectSession for FerriteSession {
    fn write_at(&mut self, object: u32, offset: u64, bytes: &[u8]) -> Result<(), StoreError> {
        Ok(self.tree.write_at(object_name(object).as_bytes(), offset, bytes)?)
    }

    fn read_at(&mut self, object: u32, offset: u64, buf: &mut [u8]) -> Result<(), StoreError> {
        let name = object_name(object);
        match self.tree.read_at(name.as_bytes(), offset, buf)? {
            Some(n) if n == buf.len() => Ok(()),
            Some(n) => {
                Err(format!("{name}: read {n} of {} bytes at offset {offset}", buf.len()).into())
            }
            None => Err(format!("{name} is missing").into()),
        }
    }
}
