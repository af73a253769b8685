//! Shared helpers for the engine's integration tests.

#![allow(dead_code)]

pub mod child;
pub mod commits;
pub mod ext4;

use std::sync::Arc;

use ferrite::testing::SimDisk;
use ferrite::{Db, Durability, Options};

pub use ferrite::testing::Rng;
pub use tempfile::TempDir;

/// Options for a pool of `pool_pages` pages and a small address space, so that tests evict
/// and re-read pages all the time.
pub fn tiny(pool_pages: u64) -> Options {
    Options {
        pool_bytes: pool_pages * 4096,
        max_size_bytes: 1 << 30,
        grow_chunk_bytes: 1 << 20,
        ..Options::default()
    }
}

/// The seeds a randomized test runs: `FERRITE_SEED` replays one, otherwise `count` fixed ones.
pub fn seeds(count: u64) -> Vec<u64> {
    match std::env::var("FERRITE_SEED") {
        Ok(seed) => vec![seed.parse().expect("FERRITE_SEED must be an integer")],
        Err(_) => (1..=count).collect(),
    }
}

/// Runs `ferrite check`'s walk and fails the test on any fault.
pub fn assert_check(db: &Db) {
    let report = db.check().expect("check ran");
    let faults = report.all_faults();
    assert!(faults.is_empty(), "check found faults:\n{}", faults.join("\n"));
}

#[allow(unused_imports)] // not every test binary recovers crash images
pub use ferrite::testing::copy_crash_image as copy_dir;

/// Options for a database on simulated disk `disk`: a small pool (smaller than the crash
/// suite's trees, so that leaves are evicted), no workers, `Sync`
/// durability, 1 MiB log segments, and checkpoints only when the test takes them (a
/// checkpoint thread would make the run depend on timing).
pub fn sim_options(disk: &Arc<SimDisk>) -> Options {
    Options {
        pool_bytes: 32 * 4096,
        max_size_bytes: 64 << 20,
        grow_chunk_bytes: 64 << 10,
        direct_io: false,
        workers: 0,
        durability: Durability::Sync,
        log_segment_bytes: 1 << 20,
        checkpoint_log_bytes: Some(1 << 40),
        // A small change buffer, so that puts into leaves not in memory wait there and
        // drains come often.
        change_buffer_bytes: Some(4 << 10),
        // No merge thread either: tests merge fragments themselves (`Db::merge_fragments`).
        object_merge_bytes_per_sec: 0,
        storage: Some(disk.clone()),
        ..Options::default()
    }
}

/// The page file's page `page_id`, read from a closed data directory.
pub fn read_page_of(dir: &std::path::Path, page_id: u64) -> Vec<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(dir.join(ferrite::PAGE_FILE_NAME)).unwrap();
    file.seek(SeekFrom::Start(page_id * 4096)).unwrap();
    let mut page = vec![0u8; 4096];
    file.read_exact(&mut page).unwrap();
    page
}

/// Writes `page` as page `page_id` of a closed data directory, its checksum recomputed with
/// the engine's own `seal` first: what an outside tester does to get past the checksum.
pub fn write_sealed_page(dir: &std::path::Path, page_id: u64, page: &mut [u8]) {
    use std::io::{Seek, SeekFrom, Write};
    ferrite::format::page::seal(page);
    let path = dir.join(ferrite::PAGE_FILE_NAME);
    let mut file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.seek(SeekFrom::Start(page_id * 4096)).unwrap();
    file.write_all(page).unwrap();
}

/// The root page of tree `name`, looked up in the catalog (a B+tree rooted at page 2 whose
/// values are root page id and tree id) of a closed data directory.
pub fn tree_root(dir: &std::path::Path, name: &str) -> u64 {
    use ferrite::btree::node::{Node, Payload};
    let mut page_id = 2;
    loop {
        let page = read_page_of(dir, page_id);
        let node = Node::new(&page);
        let (slot, found) = node.lower_bound(name.as_bytes());
        if !node.is_leaf() {
            page_id = node.child(slot);
            continue;
        }
        assert!(found, "no tree {name:?} in the catalog");
        let Payload::Inline(value) = node.value(slot) else { panic!("catalog value out of line") };
        return u64::from_le_bytes(value[..8].try_into().unwrap());
    }
}

/// Every node of the tree rooted at `root` in a closed data directory, as (page id, level),
/// parents before their children.
pub fn tree_nodes(dir: &std::path::Path, root: u64) -> Vec<(u64, u16)> {
    let mut nodes = Vec::new();
    let mut stack = vec![root];
    while let Some(page_id) = stack.pop() {
        let page = read_page_of(dir, page_id);
        let node = ferrite::btree::node::Node::new(&page);
        nodes.push((page_id, node.level()));
        if !node.is_leaf() {
            stack.extend((0..=node.count()).rev().map(|index| node.child(index)));
        }
    }
    nodes
}

/// Runs `work` on a thread of its own and returns what it returns; fails the test if it
/// panics, or if it has not finished after `limit` (a hang: the thread is left behind).
pub fn within<T: Send + 'static>(
    limit: std::time::Duration,
    what: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (done, result) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || {
        let _ = done.send(work());
    });
    match result.recv_timeout(limit) {
        Ok(value) => {
            thread.join().unwrap();
            value
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what} did not finish within {limit:?}: it hangs")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => match thread.join() {
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                panic!("{what} panicked: {message}")
            }
            Ok(()) => unreachable!("the thread sends before it ends"),
        },
    }
}
