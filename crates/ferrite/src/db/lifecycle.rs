//! A data directory's lifecycle: opening it one step at a time, closing it, and giving it
//! up as a crash would (tests).
//!
//! Nothing on disk changes until every check that can refuse the open has passed: the
//! options, the directory, its lock, the page file and its superblock, the log read to its
//! end and judged (`wal/recover.rs`), the pool and the workers' engines ([`Found`]). Only
//! then does a writable open change anything, in this order: mark the superblock "open"
//! (until a clean close), cut a torn log tail, replay the log into the pool
//! (`recovery.rs`), take a checkpoint, start the workers. A read-only open replays the log
//! into memory and writes nothing, so it works beside other readers, on a directory not
//! closed cleanly, and on read-only media.
//!
//! A new database is made only where nothing of one exists: no page file (or an empty one)
//! and no log. A page file missing or empty beside a log is damage, never a new database.
//! The page file of a new database is written under a temporary name and renamed into
//! place, so that a crash while it is made leaves either no page file or a whole one.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::lock::{DirLock, LOCK_FILE_NAME};
use super::recovery::BufferedEntries;
use super::{
    not_a_database, read_page_direct, write_page_direct, Db, Shared, DEVICES_FILE_NAME,
    PAGE_FILE_NAME,
};
use crate::btree::BTree;
use crate::buffer::BufferPool;
use crate::change_buffer::ChangeBuffer;
use crate::error::{Error, PageId, Result};
use crate::format::superblock::{Superblock, CATALOG_ROOT, NO_CHECKPOINT, SUPERBLOCK_PAGES};
use crate::format::{freelist, page};
use crate::io::{DirStorage, IoEngine, PageFile, Storage};
use crate::options::{Durability, Options};
use crate::sched::{block_on, Workers};
use crate::wal::commit::CommitLock;
use crate::wal::recover::{self, Judge, LogScan};
use crate::wal::segment::LOG_DIR_NAME;
use crate::wal::Log;

/// Reads the merge of object fragments keeps in flight.
const MERGE_IO_DEPTH: usize = 128;

/// The catalog's tree id.
pub(super) const CATALOG_TREE_ID: u64 = 0;
/// A new page file is written under this name, then renamed to `PAGE_FILE_NAME`.
const NEW_PAGE_FILE_NAME: &str = "pages.ferrite.new";

impl Db {
    /// Opens the data directory `dir`, creating it (when `options.create_if_missing`) if it
    /// does not exist or is empty.
    ///
    /// ```
    /// use ferrite::{Db, Options};
    ///
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("my-data");
    /// let options = Options { pool_bytes: 64 << 20, ..Options::default() };
    /// # let options = Options { workers: 0, ..options };
    /// let db = Db::open(&path, options.clone())?;
    /// db.tree("orders")?.put("order-1", "two apples")?;
    /// db.close()?; // (dropping the last handle closes too)
    ///
    /// let db = Db::open(&path, Options { read_only: true, ..options })?;
    /// assert_eq!(db.tree_names()?, ["orders"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<Db> {
        let (fallback, depth) = (options.engine_fallback, options.io_depth);
        // Without an engine named, the first worker's engine is the best the kernel allows
        // (its choice logged once); the other workers open the same kind.
        let kind = std::sync::Mutex::new(options.engine);
        Db::open_with_engines(dir, options, |_, pool| {
            if let Some(engine) = pool.file().own_engine(depth) {
                // A page file behind `Options::storage`: its device brings its engine.
                return engine;
            }
            let devices = pool.file().devices().expect("a page file on real devices");
            // A block medium of the second tier is read and written through the same ring.
            let tier = pool.tier().filter(|tier| tier.is_block()).map(|t| t.open_for_ring());
            let tier = tier.transpose()?;
            let tier = tier.as_ref();
            let mut kind = kind.lock().unwrap();
            let Some(chosen) = *kind else {
                let engine = crate::io::open_best_engine(devices, tier, depth)?;
                *kind = Some(engine.kind());
                return Ok(engine);
            };
            let open = |kind| crate::io::open_engine_with(kind, devices, tier, depth);
            match (open(chosen), fallback) {
                (Err(_), Some(other)) => open(other),
                (result, _) => result,
            }
        })
    }

    /// As [`Db::open`], with the workers' I/O engines made by `make_engine(worker, pool)`
    /// (tests inject failing or simulated engines here).
    #[doc(hidden)]
    pub fn open_with_engines(
        dir: impl AsRef<Path>,
        options: Options,
        make_engine: impl Fn(usize, &BufferPool) -> Result<Box<dyn IoEngine>>,
    ) -> Result<Db> {
        // Read and check: nothing on disk changes in these steps.
        options.validate()?;
        let dir = prepare_dir(dir.as_ref(), &options)?;
        let lock = DirLock::acquire(&dir, !options.read_only, options.lock_wait)?;
        let storage: Arc<dyn Storage> = match &options.storage {
            Some(storage) => Arc::clone(storage),
            None if options.read_only => Arc::new(DirStorage::read_only(&dir)),
            None => Arc::new(DirStorage::new(&dir)),
        };
        let (file, mut found) = Found::read(&dir, &options, storage.as_ref())?;
        let pool = found.pool(file, &options)?;
        let engines = (0..options.workers)
            .map(|worker| make_engine(worker, &pool))
            .collect::<Result<Vec<_>>>()?;
        // Everything that can refuse the open has passed: from here a writable open changes
        // the directory.
        let closed_cleanly = found.sb.clean;
        let log = match options.read_only {
            true => None,
            false => Some(found.start_writing(&pool, &storage, &options)?),
        };
        let Found { mut sb, superblock_damage, scan, chained_free } = found;
        let (mut recovery, buffered) =
            super::recovery::recover(scan, &pool, &options, &mut sb, chained_free)?;
        recovery.closed_cleanly = closed_cleanly;
        let shared = Arc::new(Shared {
            dir,
            pool,
            workers: Mutex::new(None),
            engine: Mutex::new(None),
            catalog: BTree { root: CATALOG_ROOT, tree_id: CATALOG_TREE_ID },
            next_tree_id: AtomicU64::new(sb.next_tree_id),
            superblock: Mutex::new(sb),
            superblock_damage: Mutex::new(superblock_damage),
            catalog_lock: Mutex::new(()),
            dropped_flags: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            read_only: options.read_only,
            lock: Mutex::new(Some(lock)),
            log,
            commit_lock: CommitLock::default(),
            intents: super::intents::Intents::new(options.update_wait),
            durability: options.durability,
            checkpoint_interval: (options.checkpoint_log_bytes, options.pool_bytes),
            checkpoint_redo: AtomicU64::new(recovery.redo_lsn),
            checkpoint_lock: Mutex::new(()),
            checkpointing: AtomicBool::new(false),
            change_buffer: Arc::new(ChangeBuffer::new(options.change_buffer_budget())),
            scan_snapshot: Mutex::new((u64::MAX, std::sync::Weak::new())),
            helpers: Mutex::new(Vec::new()),
            recovery,
            storage,
            object_space: Default::default(),
            objects_root: Default::default(),
            objects_in_use: AtomicBool::new(false),
        });
        shared.restore_change_buffer(buffered)?;
        shared.object_space.set_fragment_budget(options.object_fragment_bytes);
        if let Some(log) = &shared.log {
            // Object data is written in place before its commit and never logged: it must be
            // durable before a flush makes that commit durable.
            let space = Arc::clone(&shared.object_space);
            let pool = Arc::downgrade(&shared.pool);
            log.set_before_flush(crate::wal::log::BeforeFlush(Box::new(move || {
                match pool.upgrade() {
                    Some(pool) => space.sync_written(|| pool.file().sync()),
                    None => Ok(()),
                }
            })));
        }
        if !options.read_only {
            // The recovered state (or the new directory) becomes the base the log starts from
            // (the change buffer with it).
            shared.checkpoint()?;
            // Every free page is a durable free now: long runs of them may take object data.
            let mut free = shared.pool.free_pages();
            shared.object_space.adopt_runs(&mut free, 16);
            shared.pool.set_free_pages(free);
        }
        // Puts and deletes look for objects to free once the objects tree exists. A catalog
        // that cannot be read fails the trees' calls, not the open (`check` must still run):
        // meanwhile puts and deletes look for objects anyway.
        if shared.objects_tree(false).is_err() {
            shared.objects_in_use.store(true, Ordering::Release);
        }
        // Reads overlay the fragment log's entries the index lists: it is whole before any
        // call. (A log key range that cannot be read fails the open: objects would read
        // wrong, not fail.)
        if shared.objects_tree(false).is_ok() {
            shared.load_fragment_index()?;
        }
        start_workers(&shared, engines, &options)?;
        if !options.read_only && options.object_merge_bytes_per_sec > 0 && shared.log.is_some() {
            let merger = Arc::clone(&shared);
            let rate = options.object_merge_bytes_per_sec;
            // The merge reads its blocks in batches through a ring of its own (else one by one).
            let engine = match shared.pool.file().own_engine(MERGE_IO_DEPTH) {
                Some(engine) => engine.ok(),
                None => shared.pool.file().devices().and_then(|devices| {
                    // The workers' engine, or the one named, or the best (quietly: without
                    // it the merge reads one block at a time, which is only slower).
                    let workers = *shared.engine.lock().unwrap();
                    match workers.or(options.engine) {
                        Some(kind) => crate::io::open_engine(kind, devices, MERGE_IO_DEPTH).ok(),
                        None => crate::io::PREFERRED_ENGINES.iter().find_map(|&kind| {
                            crate::io::open_engine(kind, devices, MERGE_IO_DEPTH).ok()
                        }),
                    }
                }),
            };
            let handle = std::thread::Builder::new()
                .name("ferrite-merge".into())
                .spawn(move || merger.merge_in_background(rate, engine))
                .map_err(|e| Error::io("starting the merge of object fragments", e))?;
            shared.helpers.lock().unwrap().push(handle);
        }
        Ok(Db { shared })
    }
}

/// What an open reads before it changes anything: the superblock, the log read to its end
/// and judged, and (format version 1) the free-list chain.
struct Found {
    sb: Superblock,
    /// What is wrong with the other superblock copy, if it is damaged.
    superblock_damage: Option<String>,
    /// The log from the last checkpoint to its end; `None` before the first checkpoint.
    scan: Option<LogScan>,
    /// The free-list chain of format version 1, kept only by a directory whose log holds no
    /// checkpoint yet; checkpoint records list the free pages since.
    chained_free: Vec<PageId>,
}

impl Found {
    /// Opens (or makes) the page file and reads what is there, refusing damage.
    fn read(dir: &Path, options: &Options, storage: &dyn Storage) -> Result<(PageFile, Found)> {
        let file = open_page_file(dir, options, storage)?;
        let (sb, superblock_damage) = read_superblock(&file, dir)?;
        check_superblock(&sb, options, &file, dir)?;
        let (scan, chained_free) = match sb.checkpoint_lsn {
            NO_CHECKPOINT => {
                let found = crate::wal::chain::discover(storage)?;
                recover::check_no_log(storage, &found)?;
                (None, read_free_list(&file, &sb)?)
            }
            checkpoint_lsn => {
                let judge = if sb.clean { Judge::EndOnly } else { Judge::Rest };
                (Some(recover::scan(storage, checkpoint_lsn, judge)?), Vec::new())
            }
        };
        Ok((file, Found { sb, superblock_damage, scan, chained_free }))
    }

    /// The buffer pool over `file`. A read-only replay keeps every page it changes in
    /// memory: room for them beside the pool asked for.
    fn pool(&self, file: PageFile, options: &Options) -> Result<Arc<BufferPool>> {
        let replayed_pages = match (&self.scan, options.read_only) {
            (Some(scan), true) => scan.pages_touched(),
            _ => 0,
        };
        let pool = BufferPool::new(
            file,
            options.pool_pages() + replayed_pages,
            options.max_pages(),
            self.sb.page_count,
            self.chained_free.clone(),
        )?;
        pool.set_snapshot_limit(options.snapshot_bytes);
        let pool = pool
            .with_flex_frames(options.flex_pages())
            .with_page_validator(crate::btree::node::validate_page)
            .with_read_tagger(crate::btree::node::page_tree);
        let pool = match &options.tier {
            Some(tier) => pool.with_tier(crate::buffer::Tier::open(
                tier,
                options.max_pages(),
                options.workers,
            )?),
            None => pool,
        };
        Ok(Arc::new(pool))
    }

    /// A writable open's first changes: the superblock marked "open" (until a clean close),
    /// so that one saying "closed cleanly" promises nothing was written since (which lets an
    /// open of such a directory skip reading the log past its end); then the log, going on
    /// where it ends (a torn tail cut) or new, attached to the pool.
    fn start_writing(
        &mut self,
        pool: &BufferPool,
        storage: &Arc<dyn Storage>,
        options: &Options,
    ) -> Result<Arc<Log>> {
        let sb = &mut self.sb;
        if sb.clean {
            sb.sequence += 1;
            sb.clean = false;
            write_page_direct(pool.file(), sb.page_id(), |page| sb.encode(page))?;
            pool.file().sync()?;
            // The copy written is the damaged one, if one was (`read_superblock`).
            self.superblock_damage = None;
        }
        let (segment_bytes, direct) = (options.log_segment_bytes, options.direct_io);
        let storage = Arc::clone(storage);
        let log = match &self.scan {
            Some(scan) => scan.continue_log(storage, segment_bytes, direct)?,
            None => recover::new_log(storage, segment_bytes, direct)?,
        };
        pool.attach_log(Arc::clone(&log));
        // From the checkpoint that ends the open on, the free pages are in checkpoint
        // records, not in a chain.
        self.sb.free_list_head = 0;
        self.sb.free_list_len = 0;
        Ok(log)
    }
}

impl Shared {
    /// Gives the change buffer the entries recovery found, with the trees they belong to
    /// (a dropped tree's left with its drop).
    fn restore_change_buffer(&self, buffered: BufferedEntries) -> Result<()> {
        if buffered.is_empty() {
            return Ok(());
        }
        let trees = self
            .catalog_entries()?
            .into_iter()
            .filter_map(|(_, tree)| tree)
            .map(|tree| (tree.tree_id, tree))
            .collect();
        self.change_buffer.load(buffered, trees);
        if !self.read_only {
            // The recovered entries need the frames lent to the change buffer at once.
            self.change_buffer.lend_frames(&self.pool);
        }
        Ok(())
    }
}

/// Starts the workers (if asked for) and the periodic log flush (if the durability asks).
fn start_workers(
    shared: &Arc<Shared>,
    engines: Vec<Box<dyn IoEngine>>,
    options: &Options,
) -> Result<()> {
    if !engines.is_empty() {
        let workers =
            Workers::start(&shared.pool, shared.log.as_ref(), engines, options.idle_spin)?;
        *shared.engine.lock().unwrap() = Some(workers.engine());
        *shared.workers.lock().unwrap() = Some(workers);
        if let Some(log) = &shared.log {
            // Commits made by tasks wait for the log without flushing it: the workers'
            // loops write and sync it on their rings.
            log.set_flushed_by_workers();
        }
    }
    if let (Some(_), Durability::Periodic(interval)) = (&shared.log, options.durability) {
        let flusher = Arc::clone(shared);
        let handle = std::thread::Builder::new()
            .name("ferrite-log-flush".into())
            .spawn(move || flusher.flush_periodically(interval))
            .map_err(|e| Error::io("starting the periodic log flush", e))?;
        shared.helpers.lock().unwrap().push(handle);
    }
    Ok(())
}

/// The data directory as an absolute path, made (with its parents, durably) if it is
/// missing and the options allow.
fn prepare_dir(dir: &Path, options: &Options) -> Result<PathBuf> {
    let absolute = std::path::absolute(dir)
        .map_err(|e| Error::io(format!("resolving the path {}", dir.display()), e))?;
    // Canonical (no `..`, links resolved): what messages name, and what is opened.
    let canonical = |path: &Path| {
        std::fs::canonicalize(path)
            .map_err(|e| Error::io(format!("resolving the path {}", path.display()), e))
    };
    match std::fs::metadata(&absolute) {
        Ok(metadata) if metadata.is_dir() => canonical(&absolute),
        Ok(_) => Err(not_a_database(&absolute, "it is not a directory")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if options.read_only || !options.create_if_missing {
                return Err(not_a_database(&absolute, "it does not exist"));
            }
            // The first ancestor that exists: its new entry, and each new one below it, must
            // be synced, or a crash could lose the directory with the database in it.
            let mut existing = absolute.parent();
            while let Some(parent) = existing.filter(|p| !p.exists()) {
                existing = parent.parent();
            }
            let existing = existing.map(canonical).transpose()?;
            std::fs::create_dir_all(&absolute)
                .map_err(|e| Error::io(format!("creating {}", absolute.display()), e))?;
            let dir = canonical(&absolute)?;
            let mut sync = dir.clone();
            while let Some(parent) = sync.parent() {
                sync_dir(parent)?;
                if Some(parent) == existing.as_deref() {
                    break;
                }
                sync = parent.to_owned();
            }
            Ok(dir)
        }
        Err(e) => Err(Error::io(format!("inspecting {}", absolute.display()), e)),
    }
}

/// Makes the entries of directory `dir` durable.
fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(format!("syncing the directory {}", dir.display()), e))
}

/// Opens the page file, or makes a new database's (see the module documentation).
fn open_page_file(dir: &Path, options: &Options, storage: &dyn Storage) -> Result<PageFile> {
    let writable = !options.read_only;
    if let Some(storage) = &options.storage {
        let device = storage
            .open(PAGE_FILE_NAME, false)
            .map_err(|e| Error::io(format!("opening {PAGE_FILE_NAME}"), e))?;
        let existing = device.filter(|d| d.len().unwrap_or(0) > 0);
        let device = match existing {
            Some(device) => device,
            None => {
                refuse_new_database(dir, options, storage.as_ref())?;
                let device = storage
                    .open(PAGE_FILE_NAME, true)
                    .map_err(|e| Error::io(format!("creating {PAGE_FILE_NAME}"), e))?
                    .expect("created");
                let file = PageFile::open_on(device, true, options.grow_chunk_bytes)?;
                format(&file, options)?;
                return Ok(file);
            }
        };
        return PageFile::open_on(device, writable, options.grow_chunk_bytes);
    }
    if !options.devices.is_empty() {
        return open_striped(dir, options, storage);
    }
    let devices_file = dir.join(DEVICES_FILE_NAME);
    if devices_file.exists() {
        let listed = std::fs::read_to_string(&devices_file).unwrap_or_default();
        return Err(Error::BadOptions {
            reason: format!(
                "{} keeps its pages on [{}]: open it with those devices",
                dir.display(),
                listed.lines().collect::<Vec<_>>().join(", ")
            ),
        });
    }
    let path = dir.join(PAGE_FILE_NAME);
    let len = match std::fs::metadata(&path) {
        Ok(metadata) if !metadata.is_file() => {
            return Err(not_a_database(dir, format!("{PAGE_FILE_NAME} is not a regular file")));
        }
        Ok(metadata) => Some(metadata.len()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io(format!("inspecting {}", path.display()), e)),
    };
    if len.is_some_and(|len| len > 0) {
        return PageFile::open(&path, false, writable, options.direct_io, options.grow_chunk_bytes);
    }
    refuse_new_database(dir, options, storage)?;
    let others = std::fs::read_dir(dir)
        .map_err(|e| Error::io(format!("listing {}", dir.display()), e))?
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name())
        .any(|name| name != LOCK_FILE_NAME && name != PAGE_FILE_NAME && name != NEW_PAGE_FILE_NAME);
    if others {
        return Err(not_a_database(dir, format!("it has files but no {PAGE_FILE_NAME}")));
    }
    // Made whole under another name, then renamed: a crash leaves no page file or a whole one.
    let new_path = dir.join(NEW_PAGE_FILE_NAME);
    let _ = std::fs::remove_file(&new_path);
    let file = PageFile::open(&new_path, true, true, options.direct_io, options.grow_chunk_bytes)?;
    format(&file, options)?;
    drop(file);
    std::fs::rename(&new_path, &path)
        .map_err(|e| Error::io(format!("renaming {} into place", new_path.display()), e))?;
    sync_dir(dir)?;
    PageFile::open(&path, false, true, options.direct_io, options.grow_chunk_bytes)
}

/// The page file striped over `options.devices`; a new database's if the superblock pages
/// hold nothing at all (a device of someone else's is refused later: no valid superblock).
fn open_striped(dir: &Path, options: &Options, storage: &dyn Storage) -> Result<PageFile> {
    let writable = !options.read_only;
    let file = PageFile::open_striped(
        &options.devices,
        options.create_if_missing && writable,
        writable,
        options.direct_io,
        options.grow_chunk_bytes,
        options.stripe_chunk_bytes,
    )?;
    let mut blank = true;
    for page_id in SUPERBLOCK_PAGES {
        blank &= read_page_direct(&file, page_id)?.bytes().iter().all(|&b| b == 0);
    }
    if blank {
        refuse_new_database(dir, options, storage)?;
        format(&file, options)?;
        let devices_file = dir.join(DEVICES_FILE_NAME);
        let listed: String = options.device_names().iter().map(|d| format!("{d}\n")).collect();
        std::fs::write(&devices_file, listed)
            .map_err(|e| Error::io(format!("writing {}", devices_file.display()), e))?;
        sync_dir(dir)?;
    }
    Ok(file)
}

/// Fails unless a new database may be made in `dir`: a writable open that may create, and
/// no log (a log without its page file is damage).
fn refuse_new_database(dir: &Path, options: &Options, storage: &dyn Storage) -> Result<()> {
    let logged = storage
        .list(LOG_DIR_NAME)
        .map_err(|e| Error::io(format!("listing {}", storage.path(LOG_DIR_NAME).display()), e))?;
    if !logged.is_empty() {
        return Err(not_a_database(
            dir,
            format!(
                "{PAGE_FILE_NAME} is missing or empty, but {LOG_DIR_NAME}/ holds a write-ahead \
                 log ({} files): the page file was lost or truncated; a new database is never \
                 made over a log",
                logged.len()
            ),
        ));
    }
    if options.read_only || !options.create_if_missing {
        return Err(not_a_database(dir, format!("it has no {PAGE_FILE_NAME} (or it is empty)")));
    }
    Ok(())
}

/// Writes an empty database: both superblock copies and an empty catalog root.
fn format(file: &PageFile, options: &Options) -> Result<()> {
    write_page_direct(file, CATALOG_ROOT, |page| {
        BTree::init_root(page, CATALOG_ROOT, CATALOG_TREE_ID);
        page::seal(page);
    })?;
    for sequence in 0..2 {
        let sb = Superblock {
            sequence,
            page_count: CATALOG_ROOT + 1,
            catalog_root: CATALOG_ROOT,
            free_list_head: 0,
            free_list_len: 0,
            next_tree_id: CATALOG_TREE_ID + 1,
            clean: true,
            checkpoint_lsn: NO_CHECKPOINT,
            stripe_chunk_bytes: if options.devices.is_empty() {
                0
            } else {
                options.stripe_chunk_bytes
            },
            devices: options.device_names(),
        };
        write_page_direct(file, sb.page_id(), |page| sb.encode(page))?;
    }
    file.sync()
}

/// The newer valid superblock copy, and what is wrong with the other if it is damaged.
fn read_superblock(file: &PageFile, dir: &Path) -> Result<(Superblock, Option<String>)> {
    let mut best: Option<Superblock> = None;
    let mut reasons = Vec::new();
    for page_id in SUPERBLOCK_PAGES {
        let buf = read_page_direct(file, page_id)?;
        match Superblock::decode(buf.bytes(), page_id) {
            Ok(sb) if best.as_ref().is_none_or(|b| sb.sequence > b.sequence) => best = Some(sb),
            Ok(_) => {}
            Err(reason) => reasons.push(format!("copy {page_id}: {reason}")),
        }
    }
    let Some(best) = best else {
        return Err(not_a_database(dir, format!("no valid superblock ({})", reasons.join("; "))));
    };
    let damage = reasons.pop().map(|reason| {
        format!(
            "superblock {reason}; the other copy (sequence {}) is in use, and the next \
             superblock write replaces the damaged one",
            best.sequence
        )
    });
    Ok((best, damage))
}

/// Fails unless `sb` fits the options and the page file.
fn check_superblock(sb: &Superblock, options: &Options, file: &PageFile, dir: &Path) -> Result<()> {
    let recorded_chunk = if sb.devices.is_empty() { 0 } else { sb.stripe_chunk_bytes };
    let given_chunk = if options.devices.is_empty() { 0 } else { options.stripe_chunk_bytes };
    if sb.devices != options.device_names() || recorded_chunk != given_chunk {
        let show = |d: &[String]| {
            if d.is_empty() {
                format!("its own {PAGE_FILE_NAME}")
            } else {
                format!("[{}]", d.join(", "))
            }
        };
        return Err(Error::BadOptions {
            reason: format!(
                "{} keeps its pages on {} (stripe chunk {recorded_chunk} bytes); it was opened \
                 with devices {} (stripe chunk {given_chunk} bytes)",
                dir.display(),
                show(&sb.devices),
                show(&options.device_names())
            ),
        });
    }
    // Pages are allocated only in space the file holds, and the file is synced before a
    // superblock counts them: a count beyond the file is damage (or a truncated file).
    let held = file.size_pages();
    if sb.page_count > held {
        return Err(Error::Corrupt {
            page: sb.page_id(),
            file: file.path().to_owned(),
            reason: format!(
                "the superblock counts {} pages, but the page file holds {held} (damaged \
                 superblock, or a truncated page file)",
                sb.page_count
            ),
        });
    }
    if sb.page_count > options.max_pages() {
        return Err(Error::BadOptions {
            reason: format!(
                "the data holds {} pages but max_size_bytes allows {}",
                sb.page_count,
                options.max_pages()
            ),
        });
    }
    Ok(())
}

/// Reads the free-list chain: the ids it lists and its own pages.
fn read_free_list(file: &PageFile, sb: &Superblock) -> Result<Vec<PageId>> {
    let mut free = Vec::new();
    let mut next = sb.free_list_head;
    let mut listed = 0u64;
    while next != 0 {
        if next >= sb.page_count || free.len() as u64 > sb.page_count {
            return Err(Error::Corrupt {
                page: next,
                file: file.path().to_owned(),
                reason: "free-list chain leaves the file or loops".into(),
            });
        }
        let buf = read_page_direct(file, next)?;
        let corrupt =
            |reason: String| Error::Corrupt { page: next, file: file.path().to_owned(), reason };
        page::verify(buf.bytes(), next).map_err(corrupt)?;
        let (following, ids) = freelist::decode(buf.bytes()).map_err(corrupt)?;
        listed += ids.len() as u64;
        free.extend(ids);
        free.push(next);
        next = following;
    }
    if listed != sb.free_list_len {
        return Err(Error::Corrupt {
            page: sb.free_list_head,
            file: file.path().to_owned(),
            reason: format!("free list holds {listed} ids, superblock says {}", sb.free_list_len),
        });
    }
    Ok(free)
}

impl Db {
    /// Lets running tasks finish, writes every page back and marks the directory cleanly
    /// closed. Dropping the `Db` does the same, reporting a failure through the `log` crate.
    pub fn close(self) -> Result<()> {
        self.shared.close()
    }

    /// Gives the database up as a crash would (for tests on a simulated disk, crashed just
    /// before): the workers stop, nothing more is written, the directory lock is released.
    #[doc(hidden)]
    pub fn abandon(self) {
        let workers = self.shared.workers.lock().unwrap().take();
        self.shared.closed.store(true, Ordering::Release);
        self.shared.object_space.wake_merger();
        if let Some(mut workers) = workers {
            workers.shut_down();
        }
        for helper in std::mem::take(&mut *self.shared.helpers.lock().unwrap()) {
            let _ = helper.join();
        }
        if let Some(log) = &self.shared.log {
            log.join_helpers();
        }
        self.shared.lock.lock().unwrap().take();
    }
}

impl Shared {
    pub(super) fn close(self: &Arc<Self>) -> Result<()> {
        // Tasks finish (their trees still usable) and their I/O completes before anything
        // is written back.
        let workers = self.workers.lock().unwrap().take();
        if let Some(mut workers) = workers {
            workers.shut_down();
        }
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        if self.read_only {
            self.lock.lock().unwrap().take();
            return Ok(());
        }
        // The merge thread may be waiting for work: it sees the close at once.
        self.object_space.wake_merger();
        for helper in std::mem::take(&mut *self.helpers.lock().unwrap()) {
            let _ = helper.join();
        }
        // Every buffered put goes into its leaf: a closed directory needs no log.
        block_on(self.drain_all())?;
        // A last checkpoint writes every page back: the next open replays nothing.
        self.checkpoint()?;
        if let Some(log) = &self.log {
            log.join_helpers();
        }
        self.write_superblock(|sb| sb.clean = true)?;
        self.lock.lock().unwrap().take();
        Ok(())
    }
}

impl Drop for Db {
    /// Dropping the `Db` closes it (tree handles still alive then fail with `Closed`).
    fn drop(&mut self) {
        if let Err(e) = self.shared.close() {
            log::error!("closing {} failed: {e}", self.shared.dir.display());
        }
    }
}
