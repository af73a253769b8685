//! `bench objects` end to end on small data sets (two objects of 1 MiB, fractions of a
//! second), its configuration's errors, and its report.

use super::*;
use crate::report::ResultLine;
use crate::workloads::run::bytes_on_disk;
use tempfile::TempDir;

/// Two objects of 1 MiB in `tmp`, `threads` threads, 0.3 s (a warm-up of 60 ms), each
/// thread at most 400 measured operations.
fn small(store: ObjectStoreKind, tmp: &TempDir, pattern: Pattern, block: usize) -> ObjectsConfig {
    ObjectsConfig {
        pattern,
        block_bytes: block,
        objects: 2,
        object_mib: 1,
        depth: 2,
        seconds: 0.3,
        dir: tmp.path().join("objects"),
        cache_mib: 4,
        ops_per_thread: Some(400),
        ..ObjectsConfig::new(store)
    }
}

fn fields(line: &ResultLine) -> Vec<&str> {
    line.fields().iter().map(|(name, _)| name.as_str()).collect()
}

#[test]
fn block_sizes_patterns_and_stores_parse_with_clear_errors() {
    for (text, bytes) in
        [("2k", 2048), ("4K", 4096), ("16KiB", 16384), ("65536", 65536), ("256k", 262_144)]
    {
        assert_eq!(parse_block(text), Ok(bytes), "{text}");
    }
    for bad in ["3k", "8k", "1m", "", "4kb"] {
        let e = parse_block(bad).unwrap_err();
        assert!(e.contains("is not one of 2k, 4k, 16k, 64k, 256k"), "{bad}: {e}");
    }
    assert_eq!(block_name(16384), "16k");
    assert_eq!(parse_pattern("seqread"), Ok(Pattern::SeqRead));
    let e = parse_pattern("randrw").unwrap_err();
    assert_eq!(e, "unknown pattern \"randrw\" (randwrite, randread, seqwrite, seqread)");
    assert!(ObjectStoreKind::parse("postgres")
        .unwrap_err()
        .contains("ferrite, file, rocksdb, rocksdb-blob, sqlite"));
}

#[test]
fn configurations_out_of_range_are_refused_with_a_reason() {
    let ok = ObjectsConfig::new(ObjectStoreKind::File);
    assert!(ok.validate().is_ok());
    assert_eq!(ok.dir, PathBuf::from("ferrite-data/bench-objects-file"));
    let cases: [(ObjectsConfig, &str); 9] = [
        (ObjectsConfig { objects: 0, ..ok.clone() }, "the number of objects must be from 1"),
        (ObjectsConfig { block_bytes: 8192, ..ok.clone() }, "block size 8192 is not one of"),
        (ObjectsConfig { object_mib: 0, ..ok.clone() }, "at least 1 MiB"),
        (ObjectsConfig { objects: 2048, object_mib: 1 << 20, ..ok.clone() }, "more than 1024 GiB"),
        (ObjectsConfig { depth: 0, ..ok.clone() }, "depth 0 is out of range"),
        (ObjectsConfig { seconds: f64::NAN, ..ok.clone() }, "seconds is out of range"),
        (
            ObjectsConfig {
                objects: 1,
                object_mib: 1,
                block_bytes: 262_144,
                depth: 8,
                ..ok.clone()
            },
            "hold 4 units of 256 KiB, fewer than the 8 threads",
        ),
        (ObjectsConfig { cache_mib: 0, ..ok.clone() }, "cache of 0 MiB"),
        (ObjectsConfig { direct_api: true, ..ok.clone() }, "--direct-api is for --store ferrite"),
    ];
    for (config, reason) in cases {
        let e = config.validate().unwrap_err().to_string();
        assert!(e.contains(reason), "{reason:?} not in {e:?}");
    }
    if !cfg!(feature = "peers") {
        let e = ObjectsConfig::new(ObjectStoreKind::Sqlite).validate().unwrap_err().to_string();
        assert!(e.contains("--store sqlite needs a build with the peers"), "{e}");
    }
}

/// The file store through every pattern: a read run sets the data up and keeps it, the next
/// read run reuses it; a write run reads its writes back and leaves the data unreusable; the
/// directory goes unless kept.
#[test]
fn the_file_store_runs_every_pattern_end_to_end() {
    let tmp = TempDir::new().unwrap();
    let mut config = small(ObjectStoreKind::File, &tmp, Pattern::RandRead, 4096);
    config.keep = true;
    let report = run(&config, false).unwrap();
    assert!(report.setup_seconds.is_some() && report.ops > 0 && report.verified.is_none());
    assert_eq!(report.latency_ns.len(), report.ops);
    assert_eq!(report.bytes, report.ops * 4096);
    assert!(report.direct_io, "ext4 takes O_DIRECT: {}", report.store_description);
    let space = report.space_amp();
    assert!((1.0..1.01).contains(&space), "preallocated files: {space}");
    let line = report.result_line();
    assert_eq!(
        fields(&line)[..9],
        [
            "store",
            "workload",
            "pattern",
            "block",
            "ops_per_s",
            "mib_per_s",
            "p99_us",
            "write_amp",
            "space_amp"
        ]
    );
    let text = line.to_string();
    assert!(
        text.starts_with("result store=file workload=objects pattern=randread block=4k "),
        "{text}"
    );
    if report.disk.is_some() {
        assert_eq!(line.get("write_amp"), Some("0.00"), "a read pattern writes nothing");
    }
    assert_eq!(ResultLine::parse(&text), Some(line));
    assert!(config.dir.join(META_FILE).exists(), "a read run leaves the data reusable");

    config.pattern = Pattern::SeqRead;
    config.keep = false;
    let report = run(&config, false).unwrap();
    assert_eq!(report.setup_seconds, None, "the kept data was reused");
    assert!(report.ops > 0);
    assert!(!config.dir.exists(), "removed without --keep");

    for (pattern, block, sync) in
        [(Pattern::RandWrite, 2048, true), (Pattern::SeqWrite, 65536, false)]
    {
        let config =
            ObjectsConfig { pattern, block_bytes: block, sync, keep: true, ..config.clone() };
        let report = run(&config, false).unwrap();
        assert!(report.setup_seconds.is_some());
        let verified = report.verified.unwrap();
        assert!(verified > 0 && verified <= 2 * RECENT_WRITES as u64, "{verified}");
        assert_eq!(recent_per_thread(2, block), RECENT_WRITES);
        assert!(!config.dir.join(META_FILE).exists(), "written data is not the setup's");
        let line = report.result_line();
        assert_eq!(line.get("block"), Some(block_name(block)));
        assert_eq!(line.get("sync"), Some(if sync { "1" } else { "0" }));
        if let Some(amp) = report.write_amp() {
            assert!(amp > 0.0, "the device wrote what the threads wrote: {amp}");
        }
        assert!(report.summary().contains("read back byte for byte"), "{}", report.summary());
        assert!(bytes_on_disk(&config.dir) > 0);
    }
    // The last run kept its data, which is not reusable: the next run sets up again, and
    // then removes the directory and the parents it made.
    let report = run(&ObjectsConfig { keep: false, ..config }, false).unwrap();
    assert!(report.setup_seconds.is_some());
    assert!(!tmp.path().join("objects").exists());
}

#[test]
fn large_blocks_remember_fewer_writes_to_read_back() {
    assert_eq!(recent_per_thread(32, 4096), RECENT_WRITES);
    assert_eq!(recent_per_thread(32, 262_144), 8, "64 MiB in all");
    assert_eq!(recent_per_thread(1024, 262_144), 4, "at least 4");
}

/// A read that finds other bytes than the setup's fails the run and says what it found.
#[test]
fn a_read_of_wrong_content_fails_the_run() {
    let tmp = TempDir::new().unwrap();
    let mut config = small(ObjectStoreKind::File, &tmp, Pattern::SeqRead, 4096);
    config.keep = true;
    run(&config, false).unwrap();
    // Object 1 (thread 1's whole run, sequentially) starts with object 0's first block.
    let first = std::fs::read(crate::stores::objects::file::object_path(&config.dir, 0)).unwrap();
    let second = crate::stores::objects::file::object_path(&config.dir, 1);
    use std::os::unix::fs::FileExt;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&second)
        .unwrap()
        .write_all_at(&first[..4096], 0)
        .unwrap();
    let e = run(&config, false).unwrap_err().to_string();
    assert!(e.starts_with("verification failed: 4096 bytes at offset 0 of obj-000002"), "{e}");
    assert!(e.contains("expected object 1 version 0, found object 0 piece 0"), "{e}");
    assert!(config.dir.exists(), "a failed run leaves its data to look at");
}

/// A report's numbers: throughput, amplification, the result line's order and the `-` of a
/// run without device counters.
#[test]
fn the_report_computes_its_figures() {
    let mut latency_ns = runner::new_histogram();
    for v in [10_000, 20_000, 30_000, 900_000] {
        latency_ns.record(v).unwrap();
    }
    let config = ObjectsConfig {
        objects: 4,
        object_mib: 64,
        pattern: Pattern::RandWrite,
        ..ObjectsConfig::new(ObjectStoreKind::File)
    };
    let mut report = ObjectsReport {
        config,
        store_description: "test".into(),
        direct_io: true,
        layout_note: None,
        setup_seconds: Some(2.0),
        ops: 100_000,
        bytes: 100_000 * 4096,
        seconds: 10.0,
        warmup_seconds: 1.0,
        latency_ns,
        cpu: CpuTime { user_s: 1.0, system_s: 1.0 },
        disk: Some((
            "vda".into(),
            DiskCounters {
                reads: 1000,
                read_bytes: 1000 * 4096,
                writes: 100_000,
                written_bytes: 2 * 100_000 * 4096,
                flushes: Some(0),
            },
        )),
        settle_written: Some(100_000 * 4096 / 2),
        bytes_on_disk: 320 << 20,
        verified: Some(64),
    };
    assert_eq!(report.ops_per_s(), 10_000.0);
    assert!((report.mib_per_s() - 39.0625).abs() < 1e-9);
    assert_eq!(report.write_amp(), Some(2.5), "the window's writes and the settle's");
    assert_eq!(report.write_amp_window(), Some(2.0));
    assert_eq!(report.space_amp(), 1.25);
    let line = report.result_line();
    for (name, value) in [
        ("ops_per_s", "10000"),
        ("mib_per_s", "39.1"),
        ("write_amp", "2.50"),
        ("write_amp_window", "2.00"),
        ("space_amp", "1.250"),
        ("cpu_us_per_op", "20.00"),
        ("dev_write_kib_per_op", "8.000"),
        ("dev_reads_per_op", "0.010"),
        ("verified", "64"),
        ("reused", "0"),
        ("logical_bytes", "268435456"),
    ] {
        assert_eq!(line.get(name), Some(value), "{name} in {line}");
    }
    let summary = report.summary();
    assert!(
        summary.contains(
            "2.50 (the device wrote 781.2 MiB while measuring and 195.3 MiB while the store \
             settled after, for 390.6 MiB written by the threads; 2.00 in the window alone)"
        ),
        "{summary}"
    );
    assert!(summary.contains("1.250 (320.0 MiB allocated"), "{summary}");
    let json: serde_json::Value = serde_json::from_str(&report.json()).unwrap();
    assert_eq!(json["write_amp"], serde_json::json!(2.5));
    assert_eq!(json["write_amp_window"], serde_json::json!(2.0));
    assert_eq!(json["store_config"], "test");
    report.disk = None;
    assert_eq!(report.result_line().get("write_amp"), Some("-"));
    assert!(report.summary().contains("- (no device counters)"));
}

/// Ferrite's objects end to end, as the file store's, from tasks on its workers and from
/// threads (`direct_api`): random reads, synced 2 KiB writes (fragments) and sequential
/// 16 KiB writes, each checked as the run checks them.
#[test]
fn the_ferrite_store_runs_end_to_end() {
    let tmp = TempDir::new().unwrap();
    for direct_api in [false, true] {
        for (pattern, block, sync) in [
            (Pattern::RandRead, 4096, false),
            (Pattern::RandWrite, 2048, true),
            (Pattern::SeqWrite, 16384, false),
        ] {
            let config = ObjectsConfig {
                sync,
                direct_api,
                ..small(ObjectStoreKind::Ferrite, &tmp, pattern, block)
            };
            let what = format!("{} direct_api={direct_api}", pattern.name());
            let report = run(&config, false).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(report.ops > 0, "{what}");
            assert_eq!(report.result_line().get("store"), Some("ferrite"));
            let api = if direct_api { "from the run's threads" } else { "by tasks on the workers" };
            assert!(report.store_description.contains(api), "{what}: {}", report.store_description);
            assert!(report.layout_note.is_some(), "object_stat answers");
            assert!(report.space_amp() > 0.5);
            assert!(!config.dir.exists());
        }
    }
}

#[cfg(feature = "peers")]
mod peers {
    use super::*;

    /// RocksDB's chunks (in the LSM tree and in blob files) and SQLite's BLOBs through a
    /// read and a write run each.
    #[test]
    fn rocksdb_and_sqlite_run_end_to_end() {
        for store in
            [ObjectStoreKind::RocksDb, ObjectStoreKind::RocksDbBlob, ObjectStoreKind::Sqlite]
        {
            let tmp = TempDir::new().unwrap();
            for (pattern, block) in [(Pattern::RandRead, 16384), (Pattern::RandWrite, 2048)] {
                let config = ObjectsConfig { sync: true, ..small(store, &tmp, pattern, block) };
                let report = run(&config, false)
                    .unwrap_or_else(|e| panic!("{} {}: {e}", store.name(), pattern.name()));
                assert!(report.ops > 0);
                assert_eq!(report.result_line().get("store"), Some(store.name()));
                assert_eq!(report.direct_io, store != ObjectStoreKind::Sqlite);
                assert!(!config.dir.exists());
            }
        }
    }
}
