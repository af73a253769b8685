//! The command line's declarations and conversions: defaults, options, and the errors for
//! bad input.

use super::*;

fn parse_strs(args: &[&str]) -> Result<Action, UsageError> {
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    Cli::parse_args(&args)
}

/// The error of a command line that must fail, checked to contain `needle`.
#[track_caller]
fn fails(args: &[&str], needle: &str) -> UsageError {
    match parse_strs(args) {
        Err(e) => {
            assert!(e.to_string().contains(needle), "{args:?}: {e} lacks {needle:?}");
            e
        }
        Ok(action) => panic!("{args:?} parsed as {action:?}"),
    }
}

#[test]
fn declarations_are_consistent() {
    command().debug_assert();
}

fn db(dir: &str) -> DbArgs {
    DbArgs { dir: PathBuf::from(dir), pool_mib: DEFAULT_POOL_MIB, direct_io: true }
}

#[test]
fn put_happy_paths() {
    let expected = Action::Put(PutArgs {
        db: db("d"),
        tree: "t".into(),
        key: b"k".to_vec(),
        value: ValueSource::Arg(b"v".to_vec()),
    });
    assert_eq!(parse_strs(&["put", "--db", "d", "--tree", "t", "k", "v"]).unwrap(), expected);
    assert_eq!(parse_strs(&["put", "k", "--tree=t", "v", "--db=d"]).unwrap(), expected);
    let hex = parse_strs(&["put", "--db", "d", "--tree", "t", "--hex", "00ff", "0x"]).unwrap();
    assert!(matches!(hex, Action::Put(PutArgs { ref key, value: ValueSource::Arg(ref value), .. })
        if key == &[0, 255] && value.is_empty()));
    let dashes = parse_strs(&["put", "--db", "d", "--tree", "t", "--", "-k", "--v"]).unwrap();
    assert!(
        matches!(dashes, Action::Put(PutArgs { ref key, value: ValueSource::Arg(ref value), .. })
        if key == b"-k" && value == b"--v")
    );
    let empty_value = parse_strs(&["put", "--db", "d", "--tree", "t", "k", ""]).unwrap();
    assert!(matches!(empty_value, Action::Put(PutArgs { value: ValueSource::Arg(ref value), .. })
        if value.is_empty()));
}

#[test]
fn put_errors() {
    fails(&["put", "--tree", "t", "k", "v"], "--db <DIR>");
    fails(&["put", "--db", "d", "k", "v"], "--tree <TREE>");
    fails(&["put", "--db", "d", "--tree", "t", "k"], "<VALUE>");
    fails(&["put", "--db", "d", "--tree", "t"], "<KEY>");
    fails(&["put", "--db", "d", "--tree", "t", "k", "v", "w"], "unexpected argument 'w'");
    fails(&["put", "--db", "d", "--tree", "t", "--hex", "zz", "00"], "KEY: \"zz\" is not hex");
    fails(&["put", "--db", "d", "--tree", "t", "--hex", "00", "abc"], "VALUE: \"abc\" is not hex");
    fails(&["put", "--db", "d", "--db", "e", "--tree", "t", "k", "v"], "cannot be used multiple");
    fails(&["put", "--db", "d", "--tree", "t", "-k", "v"], "use '-- -k'");
    fails(
        &["put", "--db", "d", "--tree", "t", "--bogus", "k", "v"],
        "unexpected argument '--bogus'",
    );
    fails(&["put", "--db", "--tree", "t", "k", "v"], "a value is required for '--db <DIR>'");
    fails(&["put", "--db", "d", "--tree"], "a value is required for '--tree <TREE>'");
    fails(&["put", "--db", "", "--tree", "t", "k", "v"], "must not be empty");
    fails(&["put", "--db", "d", "--hex=1", "--tree", "t", "k", "v"], "unexpected value '1'");
    let e = fails(&["put", "--db", "d", "k", "v"], "--tree <TREE>");
    assert_eq!(e.command, "put");
    let text = e.to_string();
    assert!(text.contains("\nusage: ferrite put "), "{text}");
    assert!(text.ends_with("run `ferrite put --help` for more"), "{text}");
}

#[test]
fn get_and_del() {
    let expected = KeyArgs { db: db("d"), tree: "t".into(), hex: false, key: b"k".to_vec() };
    assert_eq!(
        parse_strs(&["get", "--db", "d", "--tree", "t", "k"]).unwrap(),
        Action::Get(GetArgs { key: expected.clone(), output: None })
    );
    assert_eq!(
        parse_strs(&["del", "--tree", "t", "--db", "d", "k"]).unwrap(),
        Action::Del(expected)
    );
    let hex = parse_strs(&["get", "--db", "d", "--tree", "t", "--hex", "6b"]).unwrap();
    assert!(matches!(hex, Action::Get(GetArgs { key: KeyArgs { hex: true, ref key, .. }, .. })
        if key == b"k"));
    let tuned =
        parse_strs(&["get", "--db", "d", "--tree", "t", "--pool-mib", "1", "--no-direct", "k"])
            .unwrap();
    assert!(matches!(
        tuned,
        Action::Get(GetArgs {
            key: KeyArgs { db: DbArgs { pool_mib: 1, direct_io: false, .. }, .. },
            ..
        })
    ));
    fails(&["get", "--db", "d", "--tree", "t"], "<KEY>");
    fails(&["get", "--db", "d", "--tree", "t", "a", "b"], "unexpected argument 'b'");
    fails(&["get", "--db", "d", "--tree", "t", "--pool-mib", "0", "k"], "0 is out of range");
    fails(&["get", "--db", "d", "--tree", "t", "--pool-mib", "1.5", "k"], "not a whole number");
    fails(&["get", "--db", "d", "--tree", "t", "--pool-mib", "-3", "k"], "'-3'");
    fails(&["get", "--db", "d", "--tree", "t", "--limit", "3", "k"], "'--limit'");
    let e = fails(&["del", "--db", "d"], "--tree <TREE>");
    assert_eq!(e.command, "del");
}

#[test]
fn values_from_files_and_outputs_to_them() {
    let put = parse_strs(&["put", "--db", "d", "--tree", "t", "k", "--value-file", "v.bin"]);
    assert_eq!(
        put.unwrap(),
        Action::Put(PutArgs {
            db: db("d"),
            tree: "t".into(),
            key: b"k".to_vec(),
            value: ValueSource::File(FileArg::Path(PathBuf::from("v.bin"))),
        })
    );
    // `-` is standard input; --hex is then for KEY only.
    let stdin =
        parse_strs(&["put", "--db", "d", "--tree", "t", "--hex", "6b", "--value-file", "-"]);
    assert!(matches!(stdin.unwrap(), Action::Put(PutArgs {
        ref key, value: ValueSource::File(FileArg::Std), .. }) if key == b"k"));
    let get = parse_strs(&["get", "--db", "d", "--tree", "t", "k", "--output", "-"]).unwrap();
    assert!(matches!(get, Action::Get(GetArgs { output: Some(FileArg::Std), .. })));
    let get = parse_strs(&["get", "--db", "d", "--tree", "t", "--output=o", "k"]).unwrap();
    assert!(matches!(get, Action::Get(GetArgs { output: Some(FileArg::Path(ref p)), .. })
        if p == &PathBuf::from("o")));
    fails(
        &["put", "--db", "d", "--tree", "t", "k", "v", "--value-file", "f"],
        "cannot be used with",
    );
    fails(
        &["put", "--db", "d", "--tree", "t", "--value-file", "f", "k", "v"],
        "cannot be used with",
    );
    let e = fails(&["put", "--db", "d", "--tree", "t", "k"], "<VALUE> or --value-file <PATH>");
    assert_eq!(e.command, "put");
    fails(&["put", "--db", "d", "--tree", "t", "k", "--value-file"], "a value is required");
    fails(&["put", "--db", "d", "--tree", "t", "k", "--value-file", ""], "must not be empty");
    fails(&["del", "--db", "d", "--tree", "t", "k", "--output", "o"], "unexpected argument");
    fails(&["stat", "--db", "d", "--tree", "t", "k", "--output", "o"], "unexpected argument");
}

#[test]
fn write_at_read_at_and_stat() {
    let args = ["write-at", "--db", "d", "--tree", "t", "k", "--offset", "4097", "v"];
    assert_eq!(
        parse_strs(&args).unwrap(),
        Action::WriteAt(WriteAtArgs {
            db: db("d"),
            tree: "t".into(),
            key: b"k".to_vec(),
            offset: 4097,
            value: ValueSource::Arg(b"v".to_vec()),
        })
    );
    let args = ["write-at", "--db", "d", "--tree", "t", "--hex", "6b", "--offset", "1m", "00ff"];
    assert!(matches!(parse_strs(&args).unwrap(), Action::WriteAt(WriteAtArgs {
        offset: 1_048_576, value: ValueSource::Arg(ref v), .. }) if v == &[0, 255]));
    let args = ["write-at", "--db", "d", "--tree", "t", "k", "--offset", "0", "--value-file", "-"];
    assert!(matches!(
        parse_strs(&args).unwrap(),
        Action::WriteAt(WriteAtArgs { value: ValueSource::File(FileArg::Std), .. })
    ));
    fails(&["write-at", "--db", "d", "--tree", "t", "k", "v"], "--offset <N>");
    fails(
        &["write-at", "--db", "d", "--tree", "t", "k", "--offset", "0"],
        "<VALUE> or --value-file",
    );
    fails(
        &["write-at", "--db", "d", "--tree", "t", "k", "--offset", "0", "v", "--value-file", "-"],
        "cannot be used with",
    );
    fails(
        &["write-at", "--db", "d", "--tree", "t", "k", "--offset", "2T", "v"],
        "not a number of bytes",
    );
    fails(
        &["write-at", "--db", "d", "--tree", "t", "k", "--offset", "1025g", "v"],
        "is out of range (0 to 1099511627776)",
    );
    fails(
        &["write-at", "--db", "d", "--tree", "t", "--hex", "6b", "--offset", "0", "zz"],
        "VALUE: \"zz\" is not hex",
    );

    let args = ["read-at", "--db", "d", "--tree", "t", "k", "--offset", "4k", "--length", "10"];
    let key = KeyArgs { db: db("d"), tree: "t".into(), hex: false, key: b"k".to_vec() };
    assert_eq!(
        parse_strs(&args).unwrap(),
        Action::ReadAt(ReadAtArgs { key: key.clone(), offset: 4096, length: 10, output: None })
    );
    let args =
        ["read-at", "--db", "d", "--tree", "t", "k", "--offset=0", "--length=0", "--output=o"];
    assert!(matches!(
        parse_strs(&args).unwrap(),
        Action::ReadAt(ReadAtArgs { offset: 0, length: 0, output: Some(FileArg::Path(_)), .. })
    ));
    fails(&["read-at", "--db", "d", "--tree", "t", "k", "--offset", "0"], "--length <N>");
    fails(&["read-at", "--db", "d", "--tree", "t", "k", "--length", "1"], "--offset <N>");
    fails(&["read-at", "--db", "d", "--tree", "t", "k", "--offset", "0", "--length", "-1"], "'-1'");
    fails(
        &["read-at", "--db", "d", "--tree", "t", "k", "v", "--offset", "0", "--length", "1"],
        "unexpected argument 'v'",
    );

    assert_eq!(parse_strs(&["stat", "--db", "d", "--tree", "t", "k"]).unwrap(), Action::Stat(key));
    let hex = parse_strs(&["stat", "--db", "d", "--tree", "t", "--hex", "00ff"]).unwrap();
    assert!(matches!(hex, Action::Stat(KeyArgs { hex: true, ref key, .. }) if key == &[0, 255]));
    fails(&["stat", "--db", "d", "--tree", "t"], "<KEY>");
    let e = fails(&["stat", "--db", "d", "k"], "--tree <TREE>");
    assert_eq!(e.command, "stat");
}

#[test]
fn keys_keep_their_bytes_even_when_not_utf8() {
    use std::os::unix::ffi::OsStringExt;
    let args: Vec<OsString> = ["get", "--db", "d", "--tree", "t"]
        .iter()
        .map(OsString::from)
        .chain([OsString::from_vec(b"\xff\x00k".to_vec())])
        .collect();
    let action = Cli::parse_args(&args).unwrap();
    assert!(matches!(action, Action::Get(GetArgs { key: KeyArgs { ref key, .. }, .. })
        if key == b"\xff\x00k"));
    let bad_tree: Vec<OsString> = ["get", "--db", "d", "k", "--tree"]
        .iter()
        .map(OsString::from)
        .chain([OsString::from_vec(b"\xff".to_vec())])
        .collect();
    let e = Cli::parse_args(&bad_tree).unwrap_err();
    assert!(e.message.contains("invalid UTF-8"), "{e}");
}

#[test]
fn scan_options() {
    let all = parse_strs(&[
        "scan",
        "--db",
        "d",
        "--tree",
        "t",
        "--from",
        "a",
        "--to",
        "m",
        "--limit",
        "10",
        "--reverse",
    ])
    .unwrap();
    assert_eq!(
        all,
        Action::Scan(ScanArgs {
            db: db("d"),
            tree: "t".into(),
            hex: false,
            from: Some(b"a".to_vec()),
            to: Some(b"m".to_vec()),
            limit: Some(10),
            reverse: true,
        })
    );
    let bare = parse_strs(&["scan", "--db", "d", "--tree", "t"]).unwrap();
    assert!(matches!(
        bare,
        Action::Scan(ScanArgs { from: None, to: None, limit: None, reverse: false, .. })
    ));
    let hex = parse_strs(&["scan", "--db", "d", "--tree", "t", "--hex", "--from=0a", "--limit=0"])
        .unwrap();
    assert!(matches!(hex, Action::Scan(ScanArgs { ref from, limit: Some(0), hex: true, .. })
        if from.as_deref() == Some(&[10][..])));
    for args in [["--from=-x"].as_slice(), &["--from", "-x"]] {
        let mut all = vec!["scan", "--db", "d", "--tree", "t"];
        all.extend_from_slice(args);
        let dash_key = parse_strs(&all).unwrap();
        assert!(
            matches!(dash_key, Action::Scan(ScanArgs { ref from, .. }) if from.as_deref() == Some(&b"-x"[..])),
            "{args:?}"
        );
    }
    fails(&["scan", "--db", "d", "--tree", "t", "--limit", "ten"], "\"ten\" is not a whole number");
    fails(
        &["scan", "--db", "d", "--tree", "t", "--hex", "--to", "xyz1"],
        "--to: \"xyz1\" is not hex",
    );
    fails(&["scan", "--db", "d", "--tree", "t", "extra"], "unexpected argument 'extra'");
    fails(
        &["scan", "--db", "d", "--tree", "t", "--reverse", "--reverse"],
        "cannot be used multiple",
    );
    fails(&["scan", "--db", "d"], "--tree <TREE>");
}

#[test]
fn trees_actions() {
    assert_eq!(
        parse_strs(&["trees", "--db", "d"]).unwrap(),
        Action::Trees(TreesArgs { db: db("d"), action: TreesAction::List })
    );
    assert_eq!(
        parse_strs(&["trees", "--db", "d", "--create", "x"]).unwrap(),
        Action::Trees(TreesArgs { db: db("d"), action: TreesAction::Create("x".into()) })
    );
    assert_eq!(
        parse_strs(&["trees", "--drop", "x", "--db", "d"]).unwrap(),
        Action::Trees(TreesArgs { db: db("d"), action: TreesAction::Drop("x".into()) })
    );
    fails(&["trees", "--db", "d", "--create", "x", "--drop", "y"], "cannot be used with");
    fails(&["trees", "--db", "d", "x"], "unexpected argument 'x'");
    fails(&["trees"], "--db <DIR>");
    fails(&["trees", "--db", "d", "--tree", "t"], "unexpected argument '--tree'");
}

#[test]
fn stats_and_check() {
    assert_eq!(
        parse_strs(&["stats", "--db", "d"]).unwrap(),
        Action::Stats(StatsArgs { source: StatsSource::Dir(db("d")), quick: false, json: false })
    );
    assert_eq!(
        parse_strs(&["stats", "--db", "d", "--quick", "--pool-mib", "8"]).unwrap(),
        Action::Stats(StatsArgs {
            source: StatsSource::Dir(DbArgs { pool_mib: 8, ..db("d") }),
            quick: true,
            json: false
        })
    );
    assert_eq!(
        parse_strs(&["stats", "--json", "--db", "d", "--quick"]).unwrap(),
        Action::Stats(StatsArgs { source: StatsSource::Dir(db("d")), quick: true, json: true })
    );
    assert_eq!(
        parse_strs(&["stats", "--server", "127.0.0.1:11211", "--json"]).unwrap(),
        Action::Stats(StatsArgs {
            source: StatsSource::Server("127.0.0.1:11211".into()),
            quick: false,
            json: true
        })
    );
    fails(&["stats"], "--server <ADDR>");
    fails(&["stats", "--server", "h:1", "--db", "d"], "cannot be used with");
    fails(&["stats", "--server", "h:1", "--quick"], "cannot be used with");
    assert_eq!(
        parse_strs(&["check", "--db", "d"]).unwrap(),
        Action::Check(CheckArgs { db: db("d"), json: false })
    );
    assert_eq!(
        parse_strs(&["check", "--db", "d", "--no-direct"]).unwrap(),
        Action::Check(CheckArgs { db: DbArgs { direct_io: false, ..db("d") }, json: false })
    );
    assert_eq!(
        parse_strs(&["check", "--db", "d", "--json"]).unwrap(),
        Action::Check(CheckArgs { db: db("d"), json: true })
    );
    fails(&["check", "--db", "d", "--json=yes"], "--json");
    fails(&["trees", "--db", "d", "--json"], "unexpected argument '--json'");
    fails(&["stats"], "--db <DIR>");
    fails(&["check", "--db", "d", "--quick"], "unexpected argument '--quick'");
    fails(&["check", "--db", "d", "now"], "unexpected argument 'now'");
}

fn lookup_of(args: &[&str]) -> LookupConfig {
    let mut all = vec!["bench", "lookup"];
    all.extend_from_slice(args);
    match parse_strs(&all).unwrap() {
        Action::BenchLookup(c) => c,
        other => panic!("{args:?}: {other:?}"),
    }
}

fn workload_of(args: &[&str]) -> RunConfig {
    match parse_strs(args).unwrap() {
        Action::BenchWorkload(c) => c,
        other => panic!("{args:?}: {other:?}"),
    }
}

#[test]
fn bench_lookup_defaults_and_options() {
    let c = lookup_of(&[]);
    assert_eq!(c, LookupConfig::default());
    assert_eq!(c.dir, PathBuf::from(lookup::DEFAULT_DIR));
    assert_eq!(c.keys, lookup::DEFAULT_KEYS);
    assert_eq!((c.pool_mib, c.seconds, c.threads, c.keep, c.direct_io), (64, 20.0, 1, false, true));
    let c = lookup_of(&[
        "--db",
        "x",
        "--keys",
        "20000",
        "--pool-mib",
        "1",
        "--seconds",
        "1",
        "--threads",
        "2",
        "--seed",
        "0x10",
        "--keep",
        "--no-direct",
    ]);
    assert_eq!(c.dir, PathBuf::from("x"));
    assert_eq!((c.keys, c.pool_mib, c.seconds, c.threads, c.seed), (20_000, 1, 1.0, 2, 16));
    assert!(c.keep && !c.direct_io);
    let c = lookup_of(&["--keys", "3.2M", "--seconds", "0.5"]);
    assert_eq!((c.keys, c.seconds), (3_200_000, 0.5));
    // The workload's names for the same options.
    let c = lookup_of(&["--records", "4.6M", "--cache-mib", "8"]);
    assert_eq!((c.keys, c.pool_mib), (4_600_000, 8));
    fails(&["bench", "lookup", "--keys", "1k", "--records", "2k"], "cannot be used multiple");
    fails(&["bench", "lookup", "--keys", "0"], "0 is out of range");
    fails(&["bench", "lookup", "--keys", "lots"], "not a whole number (like 20000, 20k, 3.2M)");
    fails(&["bench", "lookup", "--seconds", "0"], "not a positive number of seconds");
    fails(&["bench", "lookup", "--seconds", "inf"], "not a positive number of seconds");
    fails(&["bench", "lookup", "--threads", "0"], "0 is out of range");
    fails(&["bench", "lookup", "--threads", "2000"], "threads is out of range (1 to 1024)");
    fails(&["bench", "lookup", "--seed", "0xg"], "\"0xg\" is not a 64-bit number");
    fails(&["bench", "lookup", "--tree", "t"], "unexpected argument '--tree'");
    fails(&["bench", "lookup", "now"], "unexpected argument 'now'");
    fails(&["bench", "lookup", "--rate", "5"], "--rate is for the comparison workload");
    fails(&["bench", "lookup", "--no-ceiling"], "--no-ceiling is for the comparison workload");
    // A tier under the pool: twice the pool unless sized.
    assert_eq!(lookup_of(&[]).tier, None);
    let tier = lookup_of(&["--pool-mib", "32", "--tier", "/dev/shm/t"]).tier.unwrap();
    assert_eq!((tier.path.to_str(), tier.mib, tier.latency_ns), (Some("/dev/shm/t"), 64, 0));
    assert_eq!(tier.admission, ferrite::TierAdmission::DEFAULT);
    assert_eq!(tier.filter, ferrite::TierFilter::Frequency);
    let tier = lookup_of(&["--tier", "t", "--tier-filter", "off"]).tier.unwrap();
    assert_eq!(tier.filter, ferrite::TierFilter::Off);
    fails(&["bench", "lookup", "--tier", "t", "--tier-filter", "lru"], "lru");
    fails(&["bench", "lookup", "--tier-filter", "off"], "--tier");
    let e = &["bench", "lookup", "--store", "rocksdb", "--tier", "t", "--tier-filter", "off"];
    fails(e, "--tier-filter is for Ferrite's tier");
    let tier = lookup_of(&["--tier", "t", "--tier-mib", "8", "--tier-latency-ns", "300"]);
    assert_eq!(tier.tier.map(|t| (t.mib, t.latency_ns, t.medium.name())), Some((8, 300, "mapped")));
    let tier = lookup_of(&["--tier", "t", "--tier-medium", "block"]).tier.unwrap();
    assert_eq!(tier.medium, ferrite::TierMedium::Block);
    fails(&["bench", "lookup", "--tier", "t", "--tier-medium", "tape"], "tape");
    fails(&["bench", "lookup", "--tier-mib", "8"], "--tier");
    fails(&["bench", "lookup", "--store", "lmdb", "--tier", "t"], "lmdb has no second cache tier");
    fails(&["bench", "lookup", "--tier", "t", "--rocksdb-tier", "persistent"], "--store rocksdb");
    let e = &["bench", "lookup", "--store", "rocksdb", "--tier", "t", "--tier-medium", "block"];
    fails(e, "--tier-medium is for Ferrite's tier");
    fails(&["bench", "ycsb-c", "--tier-admission", "all"], "--tier");
    fails(&["bench"], "missing WORKLOAD");
    let e = fails(&["bench", "ycsb"], "unrecognized subcommand 'ycsb'");
    assert_eq!(e.command, "bench");
}

#[test]
fn bench_lookup_dispatches_on_the_store() {
    // Ferrite (no --store, or --store ferrite): the lookup benchmark.
    assert!(lookup_of(&["--store", "ferrite", "--json", "x"]).json.is_some());
    // A peer: the comparison workload of the same name, with the same option names.
    let c = workload_of(&[
        "bench",
        "lookup",
        "--store",
        "lmdb",
        "--keys",
        "20k",
        "--pool-mib",
        "8",
        "--seconds",
        "0.3",
        "--no-ceiling",
        "--json",
        "runs.jsonl",
    ]);
    assert_eq!((c.workload, c.store), (Workload::Lookup, StoreKind::Lmdb));
    assert_eq!((c.records, c.cache_mib, c.seconds, c.ceiling), (20_000, 8, 0.3, false));
    assert_eq!(c.json.as_deref(), Some(std::path::Path::new("runs.jsonl")));
    assert_eq!(c.dir, RunConfig::new(Workload::Lookup, StoreKind::Lmdb).dir);
    let c = workload_of(&["bench", "lookup", "--store", "rocksdb", "--records", "1k"]);
    assert_eq!((c.store, c.records), (StoreKind::RocksDb, 1_000));
    fails(&["bench", "lookup", "--store", "rocksdb", "--engine", "aio"], "--engine is for");
    fails(&["bench", "lookup", "--store", "rocksdb", "--devices", "a"], "--devices is for");
    fails(&["bench", "lookup", "--store", "rocksdb", "--direct-api"], "--direct-api is for");
    fails(&["bench", "lookup", "--store", "rocksdb", "--sync"], "unexpected argument '--sync'");
    fails(&["bench", "lookup", "--store", "mysql"], "unknown store \"mysql\"");
}

#[test]
fn bench_lookup_worker_and_device_options() {
    let c = lookup_of(&[]);
    assert_eq!((c.workers, c.tasks), (LookupConfig::default().workers, 64));
    assert!(c.workers >= 1);
    assert_eq!((c.engine, c.devices.is_empty(), c.direct_api), (None, true, false));
    let c = lookup_of(&[
        "--workers",
        "3",
        "--tasks",
        "128",
        "--engine",
        "aio",
        "--devices",
        "/dev/nvme0n1,/dev/nvme1n1,data/file",
        "--direct-api",
        "--threads",
        "8",
    ]);
    assert_eq!((c.workers, c.tasks, c.engine, c.threads), (3, 128, Some(EngineKind::Aio), 8));
    assert!(c.direct_api);
    let devices: Vec<PathBuf> =
        ["/dev/nvme0n1", "/dev/nvme1n1", "data/file"].iter().map(PathBuf::from).collect();
    assert_eq!(c.devices, devices);
    fails(&["bench", "lookup", "--workers", "0"], "0 is out of range");
    fails(&["bench", "lookup", "--tasks", "0"], "0 tasks per worker is out of range");
    fails(&["bench", "lookup", "--tasks", "100000"], "out of range (1 to 65536)");
    fails(&["bench", "lookup", "--engine", "all"], "unknown engine \"all\"");
    fails(&["bench", "lookup", "--devices", "a,,b"], "has an empty path");
    fails(&["bench", "lookup", "--devices", "a,b,a"], "device a is given twice");
    fails(&["bench", "lookup", "--direct-api=1"], "unexpected value '1'");
}

#[test]
fn bench_io_defaults_and_options() {
    let io = |args: &[&str]| {
        let mut all = vec!["bench", "io"];
        all.extend_from_slice(args);
        match parse_strs(&all).unwrap() {
            Action::BenchIo(c) => c,
            other => panic!("{args:?}: {other:?}"),
        }
    };
    let c = io(&[]);
    assert_eq!(c, IoBenchConfig::default());
    assert_eq!(c.file, PathBuf::from("./ferrite-data/bench-io.dat"));
    assert_eq!((c.engines.clone(), c.pattern), (vec![EngineKind::IoUring], Pattern::RandRead));
    assert_eq!((c.bs, c.depth, c.threads, c.seconds, c.size_mib), (4096, 64, 1, 10.0, 1024));
    assert!(c.direct && !c.keep && c.use_fio);
    let c = io(&[
        "--file",
        "/dev/vdb",
        "--engine",
        "all",
        "--pattern",
        "seqwrite",
        "--bs",
        "64KiB",
        "--depth",
        "128",
        "--threads",
        "2",
        "--seconds",
        "5",
        "--size-mib",
        "512",
        "--no-direct",
        "--keep",
    ]);
    assert_eq!(c.file, PathBuf::from("/dev/vdb"));
    assert_eq!(c.engines, EngineKind::ALL.to_vec());
    assert_eq!(c.pattern, Pattern::SeqWrite);
    assert_eq!((c.bs, c.depth, c.threads, c.seconds, c.size_mib), (65536, 128, 2, 5.0, 512));
    assert!(!c.direct && c.keep);
    let c = io(&["--direct", "--engine=mmap"]);
    assert!(c.direct);
    assert_eq!(c.engines, vec![EngineKind::Mmap]);
    fails(&["bench", "io", "--bs", "4000"], "4000 is not a multiple of 4096");
    fails(&["bench", "io", "--bs", "32m"], "33554432 is out of range");
    fails(&["bench", "io", "--engine", "spdk"], "unknown engine \"spdk\"");
    fails(&["bench", "io", "--pattern", "rand"], "unknown pattern \"rand\"");
    fails(&["bench", "io", "--depth", "0"], "0 is out of range");
    fails(&["bench", "io", "--threads", "1000"], "1000 is out of range (1 to 256)");
    fails(&["bench", "io", "--seconds", "-1"], "'-1'");
    fails(&["bench", "io", "--size-mib", "0"], "0 is out of range");
    fails(&["bench", "io", "--size-mib", "1", "--bs", "2m"], "does not fit in 1 MiB");
    fails(&["bench", "io", "--direct", "--no-direct"], "cannot be used with");
    fails(&["bench", "io", "--file", ""], "must not be empty");
    fails(&["bench", "io", "--db", "x"], "unexpected argument '--db'");
    fails(&["bench", "io", "extra"], "unexpected argument 'extra'");
}

#[test]
fn help_and_version() {
    let help_of = |args: &[&str]| match parse_strs(args) {
        Ok(Action::Help(text)) => text,
        other => panic!("{args:?}: {other:?}"),
    };
    let top = help_of(&["--help"]);
    assert!(top.contains("Usage: ferrite <COMMAND>") && top.contains("EXIT STATUS"), "{top}");
    assert_eq!(help_of(&["help"]), top);
    assert!(help_of(&["-h"]).contains("Usage: ferrite <COMMAND>"));
    for command in ["put", "get", "del", "scan", "trees", "stats", "check"] {
        let text = help_of(&[command, "--help"]);
        assert!(text.contains(&format!("Usage: ferrite {command} ")), "{text}");
        assert!(text.contains("--db <DIR>") && text.contains("--no-direct"), "{text}");
        assert_eq!(help_of(&["help", command]), text, "{command}");
        assert!(help_of(&[command, "--db", "d", "-h"]).contains("Usage:"), "{command}");
        // Help wins over errors in the same command line.
        assert!(help_of(&[command, "--bogus", "--help"]).contains("Usage:"), "{command}");
    }
    for workload in ["lookup", "io", "recovery", "compare", "fill", "ycsb-a", "tpcc"] {
        let text = help_of(&["bench", workload, "--help"]);
        assert!(text.contains(&format!("Usage: ferrite bench {workload} ")), "{text}");
        assert_eq!(help_of(&["help", "bench", workload]), text, "{workload}");
    }
    assert!(help_of(&["bench", "--help"]).contains("WORKLOADS"));
    assert!(help_of(&["bench", "recovery", "--seconds", "x", "-h"]).contains("--checkpoint-mib"));
    // The engine's limits, not copies of them.
    let put = help_of(&["put", "--help"]);
    assert!(put.contains(&format!("Keys (1 to {} bytes)", ferrite::MAX_KEY_LEN)), "{put}");
    assert!(put.contains(&format!("values (0 to {} bytes", ferrite::MAX_OBJECT_LEN)), "{put}");
    // After `--`, "--help" is a key.
    let key = parse_strs(&["get", "--db", "d", "--tree", "t", "--", "--help"]).unwrap();
    assert!(matches!(key, Action::Get(GetArgs { key: KeyArgs { ref key, .. }, .. })
        if key == b"--help"));
    fails(&["help", "nope"], "unrecognized subcommand 'nope'");
    assert!(help_of(&["--version"]).starts_with("ferrite "));
    assert_eq!(parse_strs(&["version"]).unwrap(), Action::Version);
}

#[test]
fn top_level_errors_and_suggestions() {
    let e = fails(&[], "missing COMMAND");
    assert!(e.to_string().contains("run `ferrite --help` for more"));
    fails(&["frobnicate"], "unrecognized subcommand 'frobnicate'");
    let e = fails(&["bnech"], "a similar subcommand exists: 'bench'");
    assert_eq!(e.command, "");
    fails(&["bench", "ycsb-g"], "similar subcommands exist: 'ycsb-a'");
    fails(&["get", "--db", "d", "--tre", "t", "k"], "a similar argument exists: '--tree'");
    fails(&["completions", "tcsh"], "invalid value 'tcsh'");
    assert_eq!(parse_strs(&["completions", "zsh"]).unwrap(), Action::Completions(Shell::Zsh));
}

#[test]
fn comparison_workloads_parse_and_refuse_bad_values() {
    let c = workload_of(&[
        "bench",
        "ycsb-a",
        "--store",
        "rocksdb",
        "--records",
        "1M",
        "--threads",
        "64",
        "--rate",
        "50k",
        "--json",
        "runs.jsonl",
        "--cache-mib",
        "128",
        "--distribution",
        "uniform",
    ]);
    assert_eq!(c.workload, Workload::Ycsb('a'));
    assert_eq!(c.store, StoreKind::RocksDb);
    assert_eq!((c.records, c.threads, c.cache_mib), (1_000_000, 64, 128));
    assert_eq!(c.rate, Some(50_000.0));
    assert_eq!(c.distribution, Distribution::Uniform);
    assert_eq!(c.json.as_deref(), Some(std::path::Path::new("runs.jsonl")));
    // The defaults are the bench crate's.
    assert_eq!(
        workload_of(&["bench", "ycsb-e"]),
        RunConfig::new(Workload::Ycsb('e'), StoreKind::Ferrite)
    );
    // --keys and --pool-mib are the same options.
    let c = workload_of(&["bench", "ycsb-b", "--keys", "2k", "--pool-mib", "8"]);
    assert_eq!((c.records, c.cache_mib), (2_000, 8));
    let c = workload_of(&["bench", "fill", "--order", "seq"]);
    assert_eq!((c.workload, c.store), (Workload::FillSequential, StoreKind::Ferrite));
    assert_eq!(c.change_buffer_mib, None, "the engine's default");
    assert_eq!(workload_of(&["bench", "fill-seq"]).workload, Workload::FillSequential);
    assert_eq!(workload_of(&["bench", "fill-random"]).workload, Workload::FillRandom);
    // Ferrite's change buffer: 0 to 128 MiB, below the cache, Ferrite only.
    let c = workload_of(&["bench", "ycsb-c", "--change-buffer-mib", "0"]);
    assert_eq!(c.change_buffer_mib, Some(0));
    fails(&["bench", "fill", "--change-buffer-mib", "129"], "out of range");
    fails(
        &["bench", "fill", "--cache-mib", "16", "--change-buffer-mib", "16"],
        "leaves nothing of the 16 MiB cache",
    );
    fails(
        &["bench", "ycsb-a", "--store", "rocksdb", "--change-buffer-mib", "8"],
        "is for --store ferrite",
    );
    fails(&["bench", "ycsb-a", "--store", "mysql"], "unknown store \"mysql\"");
    fails(&["bench", "ycsb-a", "--rate", "0"], "\"0\" is not a positive");
    fails(&["bench", "ycsb-a", "--order", "seq"], "unexpected argument '--order'");
    fails(&["bench", "fill-seq", "--order", "seq"], "--order is for `fill` only");
    fails(&["bench", "fill", "--order", "up"], "\"up\" is not seq or random");
    fails(&["bench", "ycsb-b", "--distribution", "x"], "is not uniform or zipfian");
    fails(&["bench", "ycsb-c", "--store", "lmdb", "--direct-api"], "--direct-api is for");
    fails(&["bench", "ycsb-c", "--records", "1k", "--keys", "2k"], "cannot be used multiple");
    fails(&["bench", "ycsb-c", "--tasks", "0"], "0 is out of range (1 to 65536)");
    // The disk's cap: either side, on any store; uncapped by default.
    let cap = |args: &[&str]| workload_of(args).disk_cap;
    assert!(!cap(&["bench", "ycsb-c"]).is_set());
    let c = cap(&["bench", "ycsb-c", "--store", "rocksdb", "--disk-read-iops", "3k"]);
    assert_eq!((c.read, c.write), (Some(3_000), None));
    let c = cap(&["bench", "ycsb-a", "--disk-read-iops", "5000", "--disk-write-iops", "2k"]);
    assert_eq!((c.read, c.write), (Some(5_000), Some(2_000)));
    fails(&["bench", "ycsb-c", "--disk-write-iops", "0"], "out of range");
}

#[test]
fn bench_compare_defaults_and_options() {
    let compare = |args: &[&str]| {
        let mut all = vec!["bench", "compare"];
        all.extend_from_slice(args);
        match parse_strs(&all).unwrap() {
            Action::BenchCompare(c) => c,
            other => panic!("{args:?}: {other:?}"),
        }
    };
    let c = compare(&["quick", "--stores", "ferrite", "--records", "20k"]);
    assert_eq!((c.suite.as_str(), c.stores.as_slice()), ("quick", &[StoreKind::Ferrite][..]));
    assert_eq!(c.base.records, 20_000);
    assert_eq!(c.base.dir, PathBuf::from("ferrite-data/compare"));
    assert_eq!(c.out, PathBuf::from("bench-results"));
    assert_eq!(c.rounds, 1, "one round unless asked");
    let built_in: Vec<StoreKind> = StoreKind::ALL.into_iter().filter(|s| s.built_in()).collect();
    assert_eq!(compare(&["ycsb"]).stores, built_in);
    assert_eq!(compare(&["sync", "--rounds", "3"]).rounds, 3);
    let c = compare(&["sync", "--stores", "ferrite,rocksdb", "--out", "o"]);
    assert_eq!((c.suite.as_str(), c.stores.len(), c.out), ("sync", 2, PathBuf::from("o")));
    // The serve suite's own options: defaults, values, and refused for other suites.
    let c = compare(&["serve"]);
    assert_eq!((c.serve.value_size, c.serve.get_percent, c.serve.rates), (1024, 90, None));
    let c = compare(&["serve", "--value-size", "4096", "--mix", "50:50", "--rates", "1000,8000"]);
    assert_eq!((c.serve.value_size, c.serve.get_percent), (4096, 50));
    assert_eq!(c.serve.rates, Some(vec![1000.0, 8000.0]));
    fails(&["bench", "compare", "quick", "--mix", "50:50"], "apply to the serve suite only");
    fails(&["bench", "compare", "serve", "--rates", "0"], "--rates");
    fails(&["bench", "compare", "serve", "--mix", "50:60"], "add to 110");
    let c = compare(&["tpcc", "--warehouses", "3", "--stores", "ferrite", "--seconds", "5"]);
    assert_eq!((c.suite.as_str(), c.warehouses, c.base.seconds), ("tpcc", 3, 5.0));
    assert_eq!(c.stores, [StoreKind::Ferrite]);
    assert_eq!(compare(&["tpcc"]).warehouses, 1);
    assert_eq!(compare(&["tpcc"]).stores, built_in);
    fails(&["bench", "compare", "quick", "--warehouses", "2"], "tpcc suite only");
    assert!(!compare(&["tpcc"]).reduced_scale);
    assert!(compare(&["tpcc", "--reduced-scale"]).reduced_scale);
    fails(&["bench", "compare", "quick", "--reduced-scale"], "tpcc suite only");
    // Regression: the tpcc suite ran once with --rounds 3, saying nothing.
    fails(&["bench", "compare", "tpcc", "--rounds", "3"], "--rounds does not apply to the tpcc");
    fails(&["bench", "compare", "serve", "--rounds", "2"], "--rounds does not apply to the serve");
    assert_eq!(compare(&["tpcc", "--rounds", "1"]).rounds, 1);
    fails(&["bench", "compare", "tpcc", "--warehouses", "0"], "0 is out of range");
    fails(&["bench", "compare", "huge"], "unknown suite \"huge\"");
    fails(&["bench", "compare"], "<SUITE>");
    fails(&["bench", "compare", "quick", "--stores", "x"], "unknown store \"x\"");
    for bad in ["0", "101", "x", "2.5"] {
        fails(&["bench", "compare", "sync", "--rounds", bad], "--rounds <N>");
    }
    fails(&["bench", "compare", "sync", "--committers", "8"], "unexpected argument '--committers'");
    fails(&["bench", "compare", "sync", "--sync"], "unexpected argument '--sync'");
    fails(&["bench", "compare", "sync", "--store", "lmdb"], "unexpected argument '--store'");
    fails(&["bench", "compare", "sync", "--json", "x"], "unexpected argument '--json'");
}

#[test]
fn sync_fill_parses_and_refuses_what_does_not_apply() {
    let c = workload_of(&["bench", "fill", "--sync", "--committers", "64", "--store", "rocksdb"]);
    assert_eq!((c.workload, c.store, c.committers), (Workload::FillSync, StoreKind::RocksDb, 64));
    assert_eq!(c.workload.name(), "fill-sync");
    let c = workload_of(&["bench", "fill", "--sync"]);
    assert_eq!((c.workload, c.store, c.committers), (Workload::FillSync, StoreKind::Ferrite, 1));
    let c = workload_of(&[
        "bench",
        "fill",
        "--sync",
        "--order",
        "random",
        "--committers=8",
        "--workers",
        "2",
        "--direct-api",
        "--seconds",
        "5",
    ]);
    assert_eq!((c.workload, c.committers, c.workers, c.seconds), (Workload::FillSync, 8, 2, 5.0));
    assert!(c.direct_api);
    assert_eq!(workload_of(&["bench", "fill-sync", "--committers", "4"]).committers, 4);
    assert_eq!(workload_of(&["bench", "fill-random", "--sync"]).workload, Workload::FillSync);
    // Without --sync a fill stays what it was.
    assert_eq!(workload_of(&["bench", "fill"]).workload, Workload::FillRandom);
    fails(&["bench", "fill", "--committers", "8"], "--committers is for `fill --sync`");
    fails(&["bench", "ycsb-a", "--committers", "8"], "unexpected argument '--committers'");
    fails(&["bench", "ycsb-a", "--sync"], "unexpected argument '--sync'");
    fails(&["bench", "fill", "--sync", "--order", "seq"], "does not go with --order seq");
    fails(&["bench", "fill-seq", "--sync"], "does not go with --order seq");
    fails(
        &["bench", "fill", "--sync", "--threads", "8"],
        "--threads does not apply to `fill --sync`",
    );
    fails(&["bench", "fill-sync", "--tasks", "8"], "--tasks does not apply");
    fails(&["bench", "fill", "--sync", "--committers", "0"], "0 is out of range (1 to 4096)");
    fails(&["bench", "fill", "--sync", "--committers", "many"], "is not a whole number");
    fails(&["bench", "fill", "--sync=1"], "unexpected value '1'");
    fails(&["bench", "fill", "--committers"], "a value is required for '--committers <N>'");
    let e = fails(&["bench", "fill", "--committers", "8"], "--committers is for");
    assert_eq!(e.command, "bench fill");
    assert!(e.to_string().contains("usage: ferrite bench fill "), "{e}");
}

#[test]
fn bench_recovery_defaults_options_and_errors() {
    let recovery = |args: &[&str]| {
        let mut all = vec!["bench", "recovery"];
        all.extend_from_slice(args);
        match parse_strs(&all).unwrap() {
            Action::BenchRecovery(c) => c,
            other => panic!("{args:?}: {other:?}"),
        }
    };
    let c = recovery(&[]);
    assert_eq!(c, RecoveryConfig::default());
    assert_eq!(c.seconds, vec![5.0, 10.0, 20.0]);
    assert_eq!((c.committers, c.cache_mib), (16, 64));
    assert_eq!(c.checkpoint_bytes, 256 << 20, "the engine's default for a 64 MiB pool");
    assert!(!c.keep && c.direct_io && c.json.is_none());
    let c = recovery(&[
        "--db",
        "/tmp/r",
        "--seconds",
        "10,30,60",
        "--committers",
        "64",
        "--workers=3",
        "--cache-mib",
        "8",
        "--checkpoint-mib",
        "4",
        "--keep",
        "--no-direct",
        "--json",
        "runs.jsonl",
    ]);
    assert_eq!(c.dir, PathBuf::from("/tmp/r"));
    assert_eq!(c.seconds, vec![10.0, 30.0, 60.0]);
    assert_eq!((c.committers, c.workers, c.cache_mib), (64, 3, 8));
    assert_eq!(c.checkpoint_bytes, 4 << 20);
    assert!(c.keep && !c.direct_io);
    assert_eq!(c.json.as_deref(), Some(std::path::Path::new("runs.jsonl")));
    assert_eq!(recovery(&["--seconds", "0.3,0.6"]).seconds, [0.3, 0.6]);
    assert_eq!(recovery(&["--seconds", "2"]).seconds, [2.0]);
    let e = fails(&["bench", "recovery", "--seconds", "10,,30"], "\"\" is not a");
    assert_eq!(e.command, "bench recovery");
    assert!(e.to_string().contains("usage: ferrite bench recovery"), "{e}");
    fails(&["bench", "recovery", "--seconds", "0"], "is not a positive number of seconds");
    fails(&["bench", "recovery", "--seconds", "0.0001"], "shorter than 1 ms");
    fails(&["bench", "recovery", "--committers", "4097"], "(1 to 4096)");
    fails(&["bench", "recovery", "--checkpoint-mib", "0"], "0 is out of range");
    fails(&["bench", "recovery", "--checkpoint-mib", "1.5"], "is not a whole number");
    fails(&["bench", "recovery", "--cache-mib", "0"], "0 is out of range");
    fails(&["bench", "recovery", "--workers", "0"], "0 is out of range");
    fails(&["bench", "recovery", "--db", ""], "must not be empty");
    fails(&["bench", "recovery", "--keep=1"], "unexpected value '1'");
    fails(&["bench", "recovery", "--store", "rocksdb"], "unexpected argument '--store'");
    fails(&["bench", "recovery", "--threads", "4"], "unexpected argument '--threads'");
    fails(&["bench", "recovery", "now"], "unexpected argument 'now'");
    fails(&["bench", "recovery", "--seconds", "1", "--seconds", "2"], "cannot be used multiple");
}

/// Every subcommand's `--help` names each of its flags.
#[test]
fn every_help_names_every_flag() {
    fn walk(command: &mut clap::Command, path: &mut Vec<String>) {
        let names: Vec<String> =
            command.get_subcommands().map(|s| s.get_name().to_owned()).collect();
        let help = command.render_long_help().to_string();
        for arg in command.get_arguments() {
            if let Some(long) = arg.get_long() {
                assert!(help.contains(&format!("--{long}")), "{path:?} --{long}:\n{help}");
            }
        }
        for name in names {
            path.push(name.clone());
            walk(command.find_subcommand_mut(&name).unwrap(), path);
            path.pop();
        }
    }
    let mut command = command();
    command.build();
    walk(&mut command, &mut Vec::new());
}

#[test]
fn bench_objects_runs_ferrite_as_tasks_unless_told_the_blocking_api() {
    let objects_of = |args: &[&str]| match parse_strs(&[&["bench", "objects"], args].concat()) {
        Ok(Action::BenchObjects(c)) => c,
        other => panic!("{args:?}: {other:?}"),
    };
    let c = objects_of(&[]);
    assert_eq!((c.store, c.depth, c.direct_api), (ObjectStoreKind::Ferrite, 32, false));
    assert!(c.tasks());
    let c = objects_of(&["--direct-api", "--depth", "8"]);
    assert!(c.direct_api && !c.tasks());
    assert_eq!(c.depth, 8);
    assert!(!objects_of(&["--store", "file"]).tasks(), "the file store runs from threads");
    fails(&["bench", "objects", "--store", "file", "--direct-api"], "--direct-api is for");
}

#[test]
fn serve_defaults_and_options() {
    let serve_of = |args: &[&str]| match parse_strs(&[&["serve", "--db", "d"], args].concat()) {
        Ok(Action::Serve(a)) => a,
        other => panic!("{args:?}: {other:?}"),
    };
    let a = serve_of(&[]);
    assert_eq!(a.authfile, None, "no authentication unless asked");
    assert_eq!(a.listen, "127.0.0.1:11211".parse().unwrap(), "not on the network unless told");
    assert_eq!((a.memory_mib, a.max_connections, a.item_max_mib), (256, 1024, 1));
    assert_eq!(
        (a.store_mode, a.disk_budget_mib, a.durability),
        (false, None, ferrite::Durability::Sync)
    );
    let a = serve_of(&[
        "--listen",
        "[::1]:2000",
        "--memory-mib",
        "64",
        "--mode",
        "store",
        "--disk-budget-mib",
        "1024",
        "--workers",
        "3",
        "--max-connections",
        "10",
        "--item-max-mib",
        "16",
        "--durability",
        "none",
        "--idle-timeout-secs",
        "30",
        "--authfile",
        "users.txt",
    ]);
    assert_eq!(a.authfile.as_deref(), Some(std::path::Path::new("users.txt")));
    assert_eq!(a.listen, "[::1]:2000".parse().unwrap());
    assert_eq!(a.idle_timeout_secs, 30);
    assert_eq!((a.memory_mib, a.disk_budget_mib, a.workers), (64, Some(1024), Some(3)));
    assert_eq!((a.store_mode, a.max_connections, a.item_max_mib), (true, 10, 16));
    assert_eq!(a.durability, ferrite::Durability::None);
    // A tier: OBP and the frequency filter unless told.
    assert_eq!(a.tier, None);
    let tier = serve_of(&["--tier", "/dev/shm/t"]).tier.unwrap();
    assert_eq!((tier.bytes, tier.admission), (512 << 20, ferrite::TierAdmission::DEFAULT));
    assert_eq!(tier.filter, ferrite::TierFilter::Frequency);
    let tier = serve_of(&["--tier", "/dev/shm/t", "--tier-filter", "off"]).tier.unwrap();
    assert_eq!(tier.filter, ferrite::TierFilter::Off);
    fails(&["serve", "--db", "d", "--tier-filter", "off"], "--tier");
    fails(&["serve"], "--db <DIR>");
    fails(&["serve", "--db", "d", "--listen", "localhost"], "is not an address and port");
    fails(&["serve", "--db", "d", "--item-max-mib", "2048"], "out of range");
    fails(&["serve", "--db", "d", "--mode", "lru"], "invalid value 'lru'");
}

#[test]
fn bench_serve_defaults_and_options() {
    let of = |args: &[&str]| match parse_strs(&[&["bench", "serve"], args].concat()) {
        Ok(Action::BenchServe(c)) => c,
        other => panic!("{args:?}: {other:?}"),
    };
    let c = of(&[]);
    assert_eq!(
        (c.store.name(), c.keys, c.value_size, c.get_percent),
        ("ferrite", 1_000_000, 1024, 90)
    );
    assert_eq!((c.connections, c.rate, c.zipfian, c.server), (32, None, false, None));
    let c = of(&[
        "--store",
        "memcached",
        "--keys",
        "2M",
        "--value-size",
        "4096",
        "--mix",
        "50:50",
        "--distribution",
        "zipfian",
        "--rate",
        "20000",
        "--connections",
        "64",
        "--memory-mib",
        "128",
    ]);
    assert_eq!(
        (c.store.name(), c.keys, c.value_size, c.get_percent),
        ("memcached", 2_000_000, 4096, 50)
    );
    assert_eq!((c.connections, c.rate, c.zipfian, c.memory_mib), (64, Some(20000.0), true, 128));
    let c = of(&["--server", "127.0.0.1:11211"]);
    assert_eq!(c.server, Some("127.0.0.1:11211".parse().unwrap()));
    assert_eq!(of(&["--durability", "none"]).durability, ferrite::Durability::None);
    assert_eq!(of(&[]).durability, ferrite::Durability::Sync);
    fails(
        &["bench", "serve", "--store", "memcached", "--durability", "none"],
        "--durability is for",
    );
    fails(&["bench", "serve", "--mix", "90:20"], "add to 110");
    fails(&["bench", "serve", "--store", "redis"], "unknown store \"redis\"");
    let herd = of(&["--herd", "--connections", "100"]);
    assert_eq!((herd.herd, herd.get_percent, herd.multiget), (true, 100, 1));
    assert_eq!(of(&["--multiget", "10"]).multiget, 10);
    fails(&["bench", "serve", "--herd", "--mix", "90:10"], "--herd runs rounds");
    fails(&["bench", "serve", "--multiget", "101"], "101");
    assert_eq!(of(&[]).client, serve_bench::Client::Threads);
    assert_eq!(of(&["--client", "ring"]).client, serve_bench::Client::Ring);
    fails(&["bench", "serve", "--client", "epoll"], "unknown client \"epoll\"");
    // The tier and theta.
    assert_eq!(of(&[]).tier, None);
    let c = of(&["--tier", "/dev/shm/t", "--tier-admission", "all", "--memory-mib", "100"]);
    let tier = c.tier.unwrap();
    assert_eq!((tier.mib, tier.admission), (200, ferrite::TierAdmission::All));
    assert_eq!(tier.filter, ferrite::TierFilter::Frequency);
    let c = of(&["--tier", "/dev/shm/t", "--tier-filter", "off"]);
    assert_eq!(c.tier.unwrap().filter, ferrite::TierFilter::Off);
    assert_eq!(of(&["--distribution", "zipfian", "--theta", "0.8"]).theta, 0.8);
    assert_eq!(of(&[]).theta, 0.99);
    fails(&["bench", "serve", "--theta", "0.8"], "--theta is for --distribution zipfian");
    fails(&["bench", "serve", "--store", "memcached", "--tier", "/dev/shm/t"], "--tier is for");
    fails(&["bench", "serve", "--server", "127.0.0.1:1", "--tier", "/dev/shm/t"], "--tier is");
    fails(&["bench", "serve", "--tier-mib", "8"], "--tier");
}

#[test]
fn bench_tpcc_defaults_options_and_errors() {
    let tpcc = |args: &[&str]| {
        let mut all = vec!["bench", "tpcc"];
        all.extend_from_slice(args);
        match parse_strs(&all).unwrap() {
            Action::BenchTpcc(c) => c,
            other => panic!("{args:?}: {other:?}"),
        }
    };
    let c = tpcc(&[]);
    assert_eq!(c, TpccConfig::default());
    assert_eq!((c.warehouses, c.terminals_per_warehouse, c.cache_mib), (1, 10, 1024));
    assert!(c.affinity && !c.spec_times && !c.sync && !c.no_log && !c.keep && !c.reduced);
    assert!(c.direct_io && c.json.is_none() && !c.check_only);
    assert!(tpcc(&["--check", "--warehouses", "2"]).check_only);
    let c = tpcc(&[
        "--db",
        "/tmp/t",
        "--warehouses",
        "12",
        "--cache-mib",
        "100",
        "--seconds",
        "2.5",
        "--workers=3",
        "--terminals-per-warehouse",
        "4",
        "--affinity",
        "off",
        "--spec-times",
        "--sync",
        "--seed",
        "0x10",
        "--keep",
        "--no-direct",
        "--reduced-scale",
        "--json",
        "runs.jsonl",
    ]);
    assert_eq!(c.dir, PathBuf::from("/tmp/t"));
    assert_eq!((c.warehouses, c.cache_mib, c.seconds), (12, 100, 2.5));
    assert_eq!((c.workers, c.terminals_per_warehouse, c.seed), (3, 4, 16));
    assert!(!c.affinity && c.spec_times && c.sync && c.keep && !c.direct_io && c.reduced);
    assert_eq!(c.json.as_deref(), Some(std::path::Path::new("runs.jsonl")));
    assert!(tpcc(&["--no-log"]).no_log);
    assert!(tpcc(&["--affinity", "on"]).affinity);
    let e = fails(&["bench", "tpcc", "--sync", "--no-log"], "contradict");
    assert_eq!(e.command, "bench tpcc");
    assert!(e.to_string().contains("usage: ferrite bench tpcc"), "{e}");
    fails(&["bench", "tpcc", "--affinity", "maybe"], "is not on or off");
    fails(&["bench", "tpcc", "--warehouses", "0"], "0 is out of range");
    fails(&["bench", "tpcc", "--warehouses", "10001"], "out of range");
    fails(&["bench", "tpcc", "--terminals-per-warehouse", "0"], "0 is out of range");
    fails(&["bench", "tpcc", "--seconds", "0"], "is not a positive number of seconds");
    fails(&["bench", "tpcc", "--sync=1"], "unexpected value '1'");
    // The disk's cap: either side, on any store; uncapped by default; not with --check.
    assert!(!tpcc(&[]).disk_cap.is_set());
    let c = tpcc(&["--disk-read-iops", "3k", "--disk-write-iops", "2000"]).disk_cap;
    assert_eq!((c.read, c.write), (Some(3_000), Some(2_000)));
    assert_eq!(tpcc(&["--disk-write-iops", "500"]).disk_cap.read, None);
    fails(&["bench", "tpcc", "--disk-write-iops", "0"], "out of range");
    fails(&["bench", "tpcc", "--check", "--disk-read-iops", "1000"], "--check runs none");
}

#[test]
fn bench_tpcc_store() {
    assert_eq!(TpccConfig::default().store, StoreKind::Ferrite);
    for store in [StoreKind::RocksDb, StoreKind::WiredTiger] {
        let args = ["bench", "tpcc", "--store", store.name(), "--no-log"];
        match cfg!(feature = "peers") {
            true => match parse_strs(&args).unwrap() {
                Action::BenchTpcc(c) => assert_eq!((c.store, c.no_log), (store, true)),
                other => panic!("{other:?}"),
            },
            false => {
                fails(&args, "this build has no peers");
            }
        }
    }
    fails(&["bench", "tpcc", "--store", "lmdb"], "lmdb has no transactions adapter");
    fails(&["bench", "tpcc", "--store", "sqlite"], "unknown store \"sqlite\"");
}
