//! The default engine where io_uring is refused, as a container runtime refuses it (Docker
//! 25+ and containerd 2.0 by default): a real seccomp filter makes `io_uring_setup` (and, in
//! the second test, `io_setup`) fail with `EPERM` on one thread and the threads it starts,
//! which is what such a profile does to the whole container. `Db::open` with the default
//! options must then run on AIO (or psync), say so through `log`, and work; an engine named
//! explicitly must still fail with the kernel's refusal.

mod common;

use std::sync::Mutex;

use common::{tiny, TempDir};
use ferrite::io::EngineKind;
use ferrite::testing::refuse_syscalls_on_this_thread;
use ferrite::{Db, Options};

/// Every warning logged in this test binary (its tests run in one process).
static WARNINGS: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::Level::Warn
    }
    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            WARNINGS.lock().unwrap().push(record.args().to_string());
        }
    }
    fn flush(&self) {}
}

fn capture_warnings() {
    static LOGGER: Capture = Capture;
    // Both tests call this; only the first sets the logger.
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(log::LevelFilter::Warn);
}

/// Opens a database with the default engine (two workers), writes and reads through tasks
/// and the blocking API, reopens it, and returns the engine it ran on.
fn open_write_read(dir: &TempDir) -> EngineKind {
    let options = || Options { workers: 2, io_depth: 16, ..tiny(64) };
    assert_eq!(options().engine, None, "the default names no engine");
    let db = Db::open(dir.path(), options()).expect("the default opens where io_uring is refused");
    let engine = db.engine().expect("workers were started");
    let tree = db.tree("t").unwrap();
    // More pages than the pool holds, so tasks read pages back through the fallback engine.
    let value = vec![7u8; 1000];
    for i in 0..2000u32 {
        tree.put(format!("key-{i:06}").as_bytes(), &value).unwrap();
    }
    let reader = tree.clone();
    let found = db
        .spawn(async move {
            let mut found = 0;
            for i in (0..2000u32).step_by(7) {
                let got = reader.get_async(format!("key-{i:06}").as_bytes()).await.unwrap();
                found += usize::from(got.as_deref() == Some(&[7u8; 1000][..]));
            }
            found
        })
        .unwrap()
        .wait();
    assert_eq!(found, 2000usize.div_ceil(7), "every key read back through a task");
    drop(tree);
    db.close().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(db.engine(), Some(engine), "a reopen chooses the same engine");
    assert_eq!(db.tree("t").unwrap().get(b"key-001999").unwrap().as_deref(), Some(&value[..]));
    db.close().unwrap();
    engine
}

#[test]
fn io_uring_refused_by_seccomp_falls_back_to_aio() {
    capture_warnings();
    std::thread::spawn(|| {
        refuse_syscalls_on_this_thread(&[libc::SYS_io_uring_setup]);
        let dir = TempDir::new().unwrap();
        assert_eq!(open_write_read(&dir), EngineKind::Aio);
        let warnings = WARNINGS.lock().unwrap().clone();
        assert!(
            warnings.iter().any(|w| w.contains("io_uring refused")
                && w.contains("io_uring is disabled here")
                && w.contains("use aio instead")),
            "the fallback is logged with its reason: {warnings:?}"
        );
        // Named explicitly, io_uring is that engine or the kernel's refusal.
        let dir = TempDir::new().unwrap();
        let named = Options { workers: 2, engine: Some(EngineKind::IoUring), ..tiny(64) };
        let err = Db::open(dir.path(), named).expect_err("an engine named is never replaced");
        assert!(err.to_string().contains("io_uring is disabled here"), "{err}");
    })
    .join()
    .unwrap();
}

#[test]
fn io_uring_and_aio_refused_fall_back_to_psync() {
    capture_warnings();
    std::thread::spawn(|| {
        refuse_syscalls_on_this_thread(&[libc::SYS_io_uring_setup, libc::SYS_io_setup]);
        let dir = TempDir::new().unwrap();
        assert_eq!(open_write_read(&dir), EngineKind::Psync);
        let warnings = WARNINGS.lock().unwrap().clone();
        assert!(
            warnings.iter().any(|w| w.contains("aio refused")
                && w.contains("AIO is disabled here")
                && w.contains("use psync instead")),
            "the fallback is logged with its reason: {warnings:?}"
        );
    })
    .join()
    .unwrap();
}
