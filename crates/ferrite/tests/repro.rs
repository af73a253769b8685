//! Regression tests for the reproductions of 2026-11-24 (`shared/repro/r*.sh`: bugs found
//! by testing Ferrite from outside), each on real files, and for the messages found wrong
//! with them. r1 (a power cut on ext4) is `powercut.rs`'s, r4 (a full disk) the CLI's
//! (`a_committed_change_exits_0_when_only_the_close_fails`), r5 (a corrupt inner node)
//! `page_fuzz.rs`'s.

mod common;

use std::path::{Path, PathBuf};

use common::{copy_dir, TempDir};
use ferrite::format::page::{self, PAGE_SIZE};
use ferrite::{Db, Error, Options, WriteBatch};

/// Options for a real directory: no workers, 1 MiB log segments, checkpoints only at open.
fn options() -> Options {
    Options {
        pool_bytes: 4 << 20,
        workers: 0,
        log_segment_bytes: 1 << 20,
        checkpoint_log_bytes: Some(1 << 40),
        grow_chunk_bytes: 1 << 20,
        ..Options::default()
    }
}

fn read_only() -> Options {
    Options { read_only: true, ..options() }
}

fn value(i: u64) -> Vec<u8> {
    format!("value {i:05} {}", "x".repeat(1_500)).into_bytes()
}

/// A crash image of a database whose log spans `segments` or more segment files, every
/// commit acknowledged: the image's directory and the number of keys put.
fn crash_image(tmp: &TempDir, segments: usize) -> (PathBuf, u64) {
    let live = tmp.path().join("live");
    let db = Db::open(&live, options()).unwrap();
    let tree = db.tree("t").unwrap();
    let mut keys = 0;
    while std::fs::read_dir(live.join("wal")).unwrap().count() < segments + 1 {
        let mut batch = WriteBatch::new();
        for _ in 0..8 {
            batch.put(&tree, format!("key{keys:05}").as_bytes(), value(keys));
            keys += 1;
        }
        db.write(&batch).unwrap();
    }
    let image = tmp.path().join("image");
    copy_dir(&live, &image);
    drop(tree);
    db.abandon();
    (image, keys)
}

/// Every key of a `crash_image` is there with its value.
fn assert_all_there(db: &Db, keys: u64) {
    let tree = db.open_tree("t").unwrap();
    for i in 0..keys {
        let key = format!("key{i:05}");
        assert_eq!(tree.get(key.as_bytes()).unwrap(), Some(value(i)), "{key}");
    }
}

/// Sets the 8-byte field at `offset` of both superblock copies of `dir` to `value`, their
/// checksums made good (88: the checkpoint position, 40: the page count).
fn set_superblocks(dir: &Path, offset: usize, value: u64) {
    let pages = dir.join("pages.ferrite");
    let mut bytes = std::fs::read(&pages).unwrap();
    for copy in 0..2 {
        let page = &mut bytes[copy * PAGE_SIZE..(copy + 1) * PAGE_SIZE];
        page[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
        page::seal(page);
    }
    std::fs::write(&pages, bytes).unwrap();
}

fn flip(path: &Path, offset: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[offset as usize] ^= 0xFF;
    std::fs::write(path, bytes).unwrap();
}

/// r2: one flipped byte in a later segment's header, or that segment deleted, was silently
/// taken as the end of the log (thousands of acknowledged commits gone, a clean `check`).
/// Now both are refused, naming the file; the intact image recovers every commit.
#[test]
fn r2_a_damaged_or_missing_later_segment_is_refused() {
    let tmp = TempDir::with_prefix("r2").unwrap();
    let (image, keys) = crash_image(&tmp, 3);
    let intact = tmp.path().join("intact");
    copy_dir(&image, &intact);
    let db = Db::open(&intact, options()).unwrap();
    assert_all_there(&db, keys);
    db.close().unwrap();

    for damage in ["header", "deleted"] {
        let copy = tmp.path().join(damage);
        copy_dir(&image, &copy);
        let segment = copy.join("wal/000001.log");
        if damage == "header" {
            flip(&segment, 20);
        } else {
            std::fs::remove_file(&segment).unwrap();
        }
        for opened in [Db::open(&copy, read_only()), Db::open(&copy, options())] {
            match opened {
                Err(e @ Error::LogCorrupt { .. }) => {
                    let Error::LogCorrupt { path, .. } = &e else { unreachable!() };
                    if damage == "header" {
                        assert!(path.ends_with("wal/000001.log"), "{e}");
                    } else {
                        // Named by the segment after the gap (or before it, if it was last).
                        assert!(e.to_string().contains("missing"), "{e}");
                    }
                }
                other => panic!("{damage}: {other:?}"),
            }
        }
    }
}

/// r3: a page file truncated to 0 bytes beside a log was formatted as a new database (the
/// old keys gone, the put after it exit 0, and the next open refused the log). The same
/// with a superblock whose checkpoint field says "none". Both are refused now.
#[test]
fn r3_a_lost_page_file_or_checkpoint_is_never_a_new_database() {
    let tmp = TempDir::with_prefix("r3").unwrap();
    let dir = tmp.path().join("db");
    let db = Db::open(&dir, options()).unwrap();
    let tree = db.tree("t").unwrap();
    for i in 0..30 {
        tree.put(format!("key{i}").as_bytes(), b"v").unwrap();
    }
    drop(tree);
    db.close().unwrap();

    let truncated = tmp.path().join("truncated");
    copy_dir(&dir, &truncated);
    std::fs::File::options()
        .write(true)
        .open(truncated.join("pages.ferrite"))
        .unwrap()
        .set_len(0)
        .unwrap();
    for opened in [Db::open(&truncated, options()), Db::open(&truncated, read_only())] {
        let Err(e @ Error::NotADatabase { .. }) = opened else { panic!("{opened:?}") };
        assert!(e.to_string().contains("holds a write-ahead log"), "{e}");
    }
    assert_eq!(std::fs::metadata(truncated.join("pages.ferrite")).unwrap().len(), 0);

    // The newer superblock copy rewritten to name no checkpoint (its checksum made good).
    let forgotten = tmp.path().join("forgotten");
    copy_dir(&dir, &forgotten);
    set_superblocks(&forgotten, 88, u64::MAX);
    for opened in [Db::open(&forgotten, options()), Db::open(&forgotten, read_only())] {
        let Err(e @ Error::LogCorrupt { .. }) = opened else { panic!("{opened:?}") };
        assert!(e.to_string().contains("names no checkpoint"), "{e}");
    }
}

/// r6: a write open refused for its options (the advertised largest pool) marked the
/// directory "not closed cleanly" first, locking readers out. Now nothing is written before
/// every check passed.
#[test]
fn r6_a_refused_open_changes_nothing() {
    let tmp = TempDir::with_prefix("r6").unwrap();
    let dir = tmp.path().join("db");
    let db = Db::open(&dir, options()).unwrap();
    db.tree("t").unwrap().put(b"a", b"1").unwrap();
    db.close().unwrap();
    let before = std::fs::read(dir.join("pages.ferrite")).unwrap();
    for pool_bytes in [16 << 40, 1 << 44] {
        let err = Db::open(&dir, Options { pool_bytes, ..options() }).unwrap_err();
        assert!(matches!(err, Error::BadOptions { .. }), "{err}");
    }
    assert!(std::fs::read(dir.join("pages.ferrite")).unwrap() == before);
    let db = Db::open(&dir, read_only()).unwrap();
    assert!(db.recovery_report().closed_cleanly);
    assert_eq!(db.open_tree("t").unwrap().get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
}

/// r7: a page file whose length is not a multiple of the 64 KiB growth chunk (every page
/// in use present) could not be read ("the database was opened read-only").
#[test]
fn r7_a_page_file_of_any_whole_page_length_opens() {
    let tmp = TempDir::with_prefix("r7").unwrap();
    let dir = tmp.path().join("db");
    let db = Db::open(&dir, Options { grow_chunk_bytes: 64 << 10, ..options() }).unwrap();
    let tree = db.tree("t").unwrap();
    for i in 0..2_000u64 {
        tree.put(i.to_be_bytes(), [7u8; 100]).unwrap();
    }
    drop(tree);
    let pages = db.stats().unwrap().pool.page_count;
    db.close().unwrap();
    assert!(pages % 16 != 0, "{pages} pages: a whole number of chunks proves nothing");
    let file = std::fs::File::options().write(true).open(dir.join("pages.ferrite")).unwrap();
    file.set_len(pages * PAGE_SIZE as u64).unwrap();
    drop(file);
    let db = Db::open(&dir, read_only()).unwrap();
    assert_eq!(db.open_tree("t").unwrap().get(5u64.to_be_bytes()).unwrap().unwrap(), [7; 100]);
    assert!(db.check().unwrap().is_ok());
    db.close().unwrap();
    // One page short of the count is damage, named as such.
    let file = std::fs::File::options().write(true).open(dir.join("pages.ferrite")).unwrap();
    file.set_len((pages - 1) * PAGE_SIZE as u64).unwrap();
    drop(file);
    let err = Db::open(&dir, read_only()).unwrap_err();
    assert!(matches!(err, Error::Corrupt { page: 0 | 1, .. }), "{err}");
    assert!(err.to_string().contains("the superblock counts"), "{err}");
}

/// Makes a FIFO at `path`.
fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

/// r8: a FIFO named `LOCK` or `pages.ferrite` hung every command in `open`. Now the lock is
/// the directory itself, and a page file that is not a regular file is refused at once.
#[test]
fn r8_a_fifo_in_the_directory_never_hangs_an_open() {
    let tmp = TempDir::with_prefix("r8").unwrap();
    let dir = tmp.path().join("db");
    let db = Db::open(&dir, options()).unwrap();
    db.tree("t").unwrap().put(b"k", b"v").unwrap();
    db.close().unwrap();
    let _ = std::fs::remove_file(dir.join("LOCK"));
    mkfifo(&dir.join("LOCK"));
    let done = std::thread::spawn(move || {
        let db = Db::open(&dir, read_only()).unwrap();
        assert_eq!(db.open_tree("t").unwrap().get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
        db.close().unwrap();
        Db::open(&dir, options()).unwrap().close().unwrap();
        std::fs::rename(dir.join("pages.ferrite"), dir.join("pages.saved")).unwrap();
        mkfifo(&dir.join("pages.ferrite"));
        let err = Db::open(&dir, read_only()).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    });
    let started = std::time::Instant::now();
    while !done.is_finished() {
        assert!(started.elapsed().as_secs() < 60, "an open hangs on a FIFO");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    done.join().unwrap();
}

/// The messages found wrong on 2026-11-24: an empty path ("the write-ahead log in  is
/// damaged"), relative paths, a corrupt newer superblock copy passed over without a word,
/// a corrupt catalog root called `no tree named ""`, a corrupt page count called "bad
/// options".
#[test]
fn errors_name_what_is_wrong_and_where() {
    let tmp = TempDir::with_prefix("messages").unwrap();
    let dir = tmp.path().join("db");
    let db = Db::open(&dir, options()).unwrap();
    db.tree("t").unwrap().put(b"k", b"v").unwrap();
    db.close().unwrap();

    // Every segment header zeroed: the log directory is named, with the position.
    let headers = tmp.path().join("headers");
    copy_dir(&dir, &headers);
    for entry in std::fs::read_dir(headers.join("wal")).unwrap() {
        let path = entry.unwrap().path();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[..4096].fill(0);
        std::fs::write(&path, bytes).unwrap();
    }
    let Err(Error::LogCorrupt { path, lsn, .. }) = Db::open(&headers, read_only()) else {
        panic!("a log without segments opened")
    };
    assert_eq!((path, lsn.is_some()), (headers.join("wal"), true));

    // A relative path (through `..`): messages name the absolute, canonical one.
    let cwd = std::env::current_dir().unwrap();
    let relative = pathdiff(&headers, &cwd);
    assert!(relative.starts_with(".."), "{relative:?}");
    let err = Db::open(&relative, read_only()).unwrap_err();
    let canonical = std::fs::canonicalize(&headers).unwrap();
    assert!(err.to_string().contains(canonical.to_str().unwrap()), "{err}");
    assert!(!err.to_string().contains("/../"), "{err}");

    // The newer superblock copy damaged: the other is used, and `check` says so until the
    // next superblock write replaces it.
    let superblock = tmp.path().join("superblock");
    copy_dir(&dir, &superblock);
    let pages = superblock.join("pages.ferrite");
    let bytes = std::fs::read(&pages).unwrap();
    let sequence =
        |copy: usize| u64::from_le_bytes(bytes[copy * 4096 + 32..][..8].try_into().unwrap());
    let newer = if sequence(0) > sequence(1) { 0 } else { 1 };
    flip(&pages, newer as u64 * 4096 + 40);
    let db = Db::open(&superblock, read_only()).unwrap();
    let faults = db.check().unwrap().all_faults();
    assert!(
        faults.iter().any(|f| f.starts_with(&format!("superblock copy {newer}"))),
        "{faults:?}"
    );
    assert_eq!(db.open_tree("t").unwrap().get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    db.close().unwrap();
    let db = Db::open(&superblock, options()).unwrap();
    assert!(db.check().unwrap().is_ok(), "the damaged copy was not rewritten");
    db.close().unwrap();

    // The catalog's root page replaced by a node of another tree (checksum good).
    let catalog = tmp.path().join("catalog");
    copy_dir(&dir, &catalog);
    let pages = catalog.join("pages.ferrite");
    let mut bytes = std::fs::read(&pages).unwrap();
    let root = &mut bytes[2 * PAGE_SIZE..3 * PAGE_SIZE];
    root[24..32].copy_from_slice(&77u64.to_le_bytes());
    page::seal(root);
    std::fs::write(&pages, bytes).unwrap();
    let db = Db::open(&catalog, read_only()).unwrap();
    let err = db.open_tree("t").unwrap_err();
    assert!(matches!(err, Error::Corrupt { page: 2, .. }), "{err}");
    db.close().unwrap();

    // A tree's root page made a node of another tree: damage, not "no tree named".
    let root = tmp.path().join("root");
    copy_dir(&dir, &root);
    let db = Db::open(&root, read_only()).unwrap();
    let tree = db.open_tree("t").unwrap();
    drop(tree);
    db.close().unwrap();
    let pages = root.join("pages.ferrite");
    let mut bytes = std::fs::read(&pages).unwrap();
    // The tree's root is the first page after the catalog's (the first page allocated).
    let page = &mut bytes[3 * PAGE_SIZE..4 * PAGE_SIZE];
    page[24..32].copy_from_slice(&77u64.to_le_bytes());
    page::seal(page);
    std::fs::write(&pages, bytes).unwrap();
    let db = Db::open(&root, read_only()).unwrap();
    let err = db.open_tree("t").unwrap().get(b"k").unwrap_err();
    assert!(matches!(err, Error::Corrupt { page: 3, .. }), "{err}");
    let err = db.open_tree("t").unwrap().iter().next().unwrap().unwrap_err();
    assert!(matches!(err, Error::Corrupt { page: 3, .. }), "{err}");
    db.close().unwrap();

    // A page count beyond the file: damage, not "bad options".
    let count = tmp.path().join("count");
    copy_dir(&dir, &count);
    set_superblocks(&count, 40, 1 << 40);
    let err = Db::open(&count, read_only()).unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("the superblock counts"), "{err}");
}

/// `path` relative to `base` (both absolute): enough `..` and the rest.
fn pathdiff(path: &Path, base: &Path) -> PathBuf {
    let common = path.components().zip(base.components()).take_while(|(a, b)| a == b).count();
    let mut relative = PathBuf::new();
    for _ in base.components().skip(common) {
        relative.push("..");
    }
    relative.extend(path.components().skip(common));
    relative
}

/// Readers share a directory: two read-only opens at once, while a writer waits for them
/// (`Options::lock_wait`) and is refused, naming this process, when it does not wait.
#[test]
fn readers_share_a_directory_and_a_writer_waits_for_them() {
    let tmp = TempDir::with_prefix("readers").unwrap();
    let dir = tmp.path().join("db");
    Db::open(&dir, options()).unwrap().tree("t").unwrap().put(b"k", b"v").unwrap();
    let first = Db::open(&dir, read_only()).unwrap();
    let second = Db::open(&dir, read_only()).unwrap();
    let err = Db::open(&dir, options()).unwrap_err();
    let Error::Locked { by, .. } = &err else { panic!("{err}") };
    assert!(by.contains(&std::process::id().to_string()), "{err}");
    // And what that process runs: this test binary.
    let exe = std::env::args().next().unwrap();
    assert!(by.contains(&format!("(reading: {exe}")), "{err}");
    let waiting = {
        let dir = dir.clone();
        std::thread::spawn(move || {
            let wait = std::time::Duration::from_secs(30);
            Db::open(&dir, Options { lock_wait: wait, ..options() }).map(|db| db.close())
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(50));
    first.close().unwrap();
    second.close().unwrap();
    waiting.join().unwrap().unwrap().unwrap();
}

/// A read-only open works on read-only media (a read-only bind mount; root only, as CI
/// runs), a directory not closed cleanly included: recovered in memory, nothing written.
#[test]
fn read_only_media_are_read() {
    use std::os::unix::fs::MetadataExt;
    if std::fs::metadata("/proc/self").map_or(true, |m| m.uid() != 0) {
        eprintln!("SKIP read_only_media_are_read: needs root for a read-only bind mount");
        return;
    }
    let tmp = TempDir::with_prefix("read-only-media").unwrap();
    let (image, keys) = crash_image(&tmp, 1);
    let mount = tmp.path().join("ro");
    std::fs::create_dir(&mount).unwrap();
    let run = |args: &[&str]| std::process::Command::new("mount").args(args).status().unwrap();
    assert!(run(&["--bind", image.to_str().unwrap(), mount.to_str().unwrap()]).success());
    let unmount = Unmount(mount.clone());
    assert!(run(&["-o", "remount,ro,bind", mount.to_str().unwrap()]).success());
    let db = Db::open(&mount, read_only()).unwrap();
    assert!(!db.recovery_report().closed_cleanly && db.recovery_report().in_memory);
    assert_all_there(&db, keys);
    db.close().unwrap();
    let err = Db::open(&mount, options()).unwrap_err();
    assert!(!matches!(err, Error::LogCorrupt { .. } | Error::Corrupt { .. }), "{err}");
    drop(unmount);
}

/// Unmounts a mount point when dropped.
struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// A first open that crashed after writing its checkpoint record but before recording it in
/// the superblock leaves a log of checkpoint records only: the next open starts a new log
/// (removing the old one, whose sectors sit where the new log writes), and that log recovers.
#[test]
fn a_first_open_that_crashed_before_its_checkpoint_starts_over() {
    let tmp = TempDir::with_prefix("first-open").unwrap();
    let dir = tmp.path().join("db");
    let db = Db::open(&dir, options()).unwrap();
    // A longer log than the new one will be (its sectors past the new log's end would read
    // as its continuation if they stayed).
    for _ in 0..200 {
        db.checkpoint().unwrap();
    }
    db.close().unwrap();
    // The superblock as the format left it: no checkpoint.
    set_superblocks(&dir, 88, u64::MAX);
    let db = Db::open(&dir, options()).unwrap();
    db.tree("t").unwrap().put(b"k", b"v").unwrap();
    let image = tmp.path().join("image");
    copy_dir(&dir, &image);
    db.abandon();
    let db = Db::open(&image, options()).unwrap();
    assert_eq!(db.open_tree("t").unwrap().get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    assert!(db.check().unwrap().is_ok());
}
