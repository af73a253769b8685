//! End-to-end tests of the `ferrite` binary: each runs the built program on a data directory
//! of its own under Cargo's temporary directory and checks stdout, stderr and exit status.

use ferrite::testing::Tmpfs;
use std::ffi::OsString;
use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

/// A directory for one test, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(label: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "cli-{label}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    /// A data directory path inside (not created).
    fn db(&self) -> String {
        self.0.join("db").to_str().unwrap().to_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn run_os(args: &[OsString]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferrite")).args(args).output().expect("running ferrite")
}

fn run(args: &[&str]) -> Output {
    run_os(&args.iter().map(OsString::from).collect::<Vec<_>>())
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn describe(args: &[&str], o: &Output) -> String {
    format!(
        "ferrite {}\nstatus: {:?}\nstdout:\n{}\nstderr:\n{}",
        args.join(" "),
        o.status.code(),
        text(&o.stdout),
        text(&o.stderr)
    )
}

/// Runs `args`, expects exit status `status`, returns stdout.
#[track_caller]
fn expect(status: i32, args: &[&str]) -> String {
    let o = run(args);
    assert_eq!(o.status.code(), Some(status), "{}", describe(args, &o));
    text(&o.stdout)
}

#[track_caller]
fn ok(args: &[&str]) -> String {
    expect(0, args)
}

fn put(db: &str, tree: &str, key: &str, value: &str) {
    ok(&["put", "--db", db, "--tree", tree, key, value]);
}

#[test]
fn put_get_del_round_trip() {
    let tmp = TempDir::new("roundtrip");
    let db = tmp.db();
    put(&db, "t", "apple", "red");
    assert_eq!(ok(&["get", "--db", &db, "--tree", "t", "apple"]), "red\n");
    put(&db, "t", "apple", "green");
    assert_eq!(ok(&["get", "--db", &db, "--tree", "t", "apple"]), "green\n");
    put(&db, "t", "empty", "");
    assert_eq!(ok(&["get", "--db", &db, "--tree", "t", "empty"]), "\n");
    assert_eq!(ok(&["del", "--db", &db, "--tree", "t", "apple"]), "");
    let args = ["get", "--db", &db, "--tree", "t", "apple"];
    let o = run(&args);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&args, &o));
    assert!(o.stdout.is_empty());
    assert!(text(&o.stderr).contains("not found"), "{}", describe(&args, &o));
    expect(1, &["del", "--db", &db, "--tree", "t", "apple"]);
    // Dashes need `--`.
    ok(&["put", "--db", &db, "--tree", "t", "--", "-dash", "--value"]);
    assert_eq!(ok(&["get", "--db", &db, "--tree", "t", "--", "-dash"]), "--value\n");
}

#[test]
fn get_of_a_missing_key_exits_1() {
    let tmp = TempDir::new("missing");
    let db = tmp.db();
    put(&db, "t", "a", "1");
    let args = ["get", "--db", &db, "--tree", "t", "b"];
    let o = run(&args);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&args, &o));
    assert_eq!(o.stdout, b"");
}

#[test]
fn a_missing_tree_is_an_error() {
    let tmp = TempDir::new("notree");
    let db = tmp.db();
    put(&db, "t", "a", "1");
    let args = ["get", "--db", &db, "--tree", "nope", "a"];
    let o = run(&args);
    assert_eq!(o.status.code(), Some(2), "{}", describe(&args, &o));
    assert!(
        text(&o.stderr).starts_with("ferrite: no tree named \"nope\""),
        "{}",
        describe(&args, &o)
    );
}

#[test]
fn scan_with_bounds_limit_and_reverse() {
    let tmp = TempDir::new("scan");
    let db = tmp.db();
    for (k, v) in [("a", "1"), ("b", "2"), ("c", "3"), ("d", "4"), ("e", "5")] {
        put(&db, "t", k, v);
    }
    let scan = |extra: &[&str]| {
        let mut args = vec!["scan", "--db", &db, "--tree", "t"];
        args.extend_from_slice(extra);
        ok(&args)
    };
    assert_eq!(scan(&[]), "a\t1\nb\t2\nc\t3\nd\t4\ne\t5\n");
    assert_eq!(scan(&["--from", "b", "--to", "d"]), "b\t2\nc\t3\n");
    assert_eq!(scan(&["--from", "bb"]), "c\t3\nd\t4\ne\t5\n");
    assert_eq!(scan(&["--to", "b"]), "a\t1\n");
    assert_eq!(scan(&["--reverse"]), "e\t5\nd\t4\nc\t3\nb\t2\na\t1\n");
    assert_eq!(scan(&["--from", "b", "--to", "e", "--reverse"]), "d\t4\nc\t3\nb\t2\n");
    assert_eq!(scan(&["--limit", "2"]), "a\t1\nb\t2\n");
    assert_eq!(scan(&["--reverse", "--limit", "2"]), "e\t5\nd\t4\n");
    assert_eq!(scan(&["--limit", "0"]), "");
    assert_eq!(scan(&["--from", "d", "--to", "b"]), "");
    assert_eq!(scan(&["--from", "x"]), "");
}

#[test]
fn hex_keys_and_values_in_and_out() {
    let tmp = TempDir::new("hex");
    let db = tmp.db();
    ok(&["put", "--db", &db, "--tree", "t", "--hex", "00ff", "0102"]);
    ok(&["put", "--db", &db, "--tree", "t", "--hex", "0x61", "FF41"]);
    assert_eq!(ok(&["get", "--db", &db, "--tree", "t", "--hex", "00ff"]), "0102\n");
    assert_eq!(ok(&["scan", "--db", &db, "--tree", "t", "--hex"]), "00ff\t0102\n61\tff41\n");
    assert_eq!(ok(&["scan", "--db", &db, "--tree", "t", "--hex", "--from", "01"]), "61\tff41\n");
    // Without --hex, binary data is escaped, never written raw.
    assert_eq!(ok(&["scan", "--db", &db, "--tree", "t"]), "\\x00\\xff\t\\x01\\x02\na\t\\xffA\n");
    let args = ["get", "--db", &db, "--tree", "t", "a"];
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&args, &o));
    assert_eq!(text(&o.stdout), "\\xffA\n");
    assert!(text(&o.stderr).contains("--hex"), "{}", describe(&args, &o));
    expect(2, &["get", "--db", &db, "--tree", "t", "--hex", "0g"]);
}

#[test]
fn text_that_would_break_lines_is_escaped_in_scan_only() {
    let tmp = TempDir::new("escape");
    let db = tmp.db();
    put(&db, "t", "a\tb", "line1\nline2");
    assert_eq!(ok(&["scan", "--db", &db, "--tree", "t"]), "a\\tb\tline1\\nline2\n");
    assert_eq!(ok(&["get", "--db", &db, "--tree", "t", "a\tb"]), "line1\nline2\n");
    // A key that is not UTF-8 goes in byte for byte.
    let mut args: Vec<OsString> =
        ["put", "--db", &db, "--tree", "t"].iter().map(OsString::from).collect();
    args.push(OsString::from_vec(b"\xfe".to_vec()));
    args.push(OsString::from("bin"));
    assert_eq!(run_os(&args).status.code(), Some(0));
    assert_eq!(ok(&["scan", "--db", &db, "--tree", "t", "--hex", "--from", "fe"]), "fe\t62696e\n");
}

#[test]
fn read_only_commands_refuse_a_directory_that_is_not_a_database() {
    let tmp = TempDir::new("notdb");
    let other = tmp.0.join("other");
    fs::create_dir_all(&other).unwrap();
    fs::write(other.join("hello.txt"), b"hi").unwrap();
    let other = other.to_str().unwrap();
    let absent = tmp.db();
    for dir in [other, absent.as_str()] {
        for args in [
            vec!["get", "--db", dir, "--tree", "t", "k"],
            vec!["scan", "--db", dir, "--tree", "t"],
            vec!["trees", "--db", dir],
            vec!["stats", "--db", dir],
            vec!["check", "--db", dir],
            // Errors are not JSON: stderr, and nothing on stdout.
            vec!["stats", "--db", dir, "--json"],
            vec!["check", "--db", dir, "--json"],
            vec!["del", "--db", dir, "--tree", "t", "k"],
        ] {
            let o = run(&args);
            assert_eq!(o.status.code(), Some(2), "{}", describe(&args, &o));
            assert!(o.stdout.is_empty(), "{}", describe(&args, &o));
            let err = text(&o.stderr);
            assert!(
                err.starts_with("ferrite: ") && err.contains("is not a Ferrite data directory"),
                "{}",
                describe(&args, &o)
            );
        }
    }
    assert!(!Path::new(&absent).exists(), "a read-only command created the directory");
    assert_eq!(fs::read_dir(other).unwrap().count(), 1, "files were added to {other}");
    // put refuses it too (it holds somebody else's files).
    expect(2, &["put", "--db", other, "--tree", "t", "k", "v"]);
}

#[test]
fn trees_create_list_drop() {
    let tmp = TempDir::new("trees");
    let db = tmp.db();
    ok(&["trees", "--db", &db, "--create", "zeta"]);
    put(&db, "alpha", "k", "v");
    assert_eq!(ok(&["trees", "--db", &db]), "alpha\nzeta\n");
    expect(2, &["trees", "--db", &db, "--create", "zeta"]);
    ok(&["trees", "--db", &db, "--drop", "zeta"]);
    assert_eq!(ok(&["trees", "--db", &db]), "alpha\n");
    expect(2, &["trees", "--db", &db, "--drop", "zeta"]);
}

#[test]
fn stats_reports_trees_and_their_keys() {
    let tmp = TempDir::new("stats");
    let db = tmp.db();
    for i in 0..30 {
        put(&db, "numbers", &format!("k{i:03}"), "v");
    }
    put(&db, "other", "x", "y");
    let out = ok(&["stats", "--db", &db]);
    assert!(out.contains("trees       2"), "{out}");
    let numbers = out.lines().find(|l| l.trim_start().starts_with("numbers")).unwrap_or("");
    assert!(numbers.split_whitespace().nth(1) == Some("30"), "{out}");
    let quick = ok(&["stats", "--db", &db, "--quick"]);
    assert!(quick.contains("skipped (--quick)") && !quick.contains("numbers"), "{quick}");
}

#[test]
fn check_passes_on_good_data_and_fails_on_a_flipped_byte() {
    let tmp = TempDir::new("check");
    let db = tmp.db();
    for i in 0..200 {
        put(&db, "t", &format!("key{i:05}"), &format!("value {i}"));
    }
    let out = ok(&["check", "--db", &db]);
    assert!(out.contains("ok: no faults found"), "{out}");
    let row = out.lines().find(|l| l.trim_start().starts_with("t ")).unwrap_or("");
    assert_eq!(row.split_whitespace().nth(1), Some("200"), "{out}");
    // The log section: the close's checkpoint, nothing to replay after it.
    let wal = Path::new(&db).join("wal");
    // (A segment file prepared ahead for reuse may be listed too.)
    let log_line = format!("log: 1 segment in {}", wal.display());
    assert!(out.contains(&log_line) && out.contains("last checkpoint at"), "{out}");
    assert!(out.contains(": 0 commits, "), "{out}");

    // Page 2 is the catalog root: flip a byte in its middle.
    let pages = Path::new(&db).join("pages.ferrite");
    let mut file = fs::OpenOptions::new().read(true).write(true).open(&pages).unwrap();
    let offset = 2 * 4096 + 100;
    let mut byte = [0u8];
    file.seek(SeekFrom::Start(offset)).unwrap();
    file.read_exact(&mut byte).unwrap();
    file.seek(SeekFrom::Start(offset)).unwrap();
    file.write_all(&[byte[0] ^ 0x5a]).unwrap();
    file.sync_all().unwrap();
    drop(file);

    let args = ["check", "--db", &db];
    let o = run(&args);
    let code = o.status.code();
    assert!(code == Some(1) || code == Some(2), "{}", describe(&args, &o));
    let reported = text(&o.stdout).contains("fault: ") || text(&o.stderr).starts_with("ferrite: ");
    assert!(reported, "{}", describe(&args, &o));
}

/// A healthy directory whose trees freed pages passes `check` (a read-only open once did not
/// know the free pages, which are in the checkpoint record, and reported every one lost).
#[test]
fn check_passes_after_a_tree_is_dropped() {
    let tmp = TempDir::new("check-free");
    let db = tmp.db();
    put(&db, "t", "k", "v");
    put(&db, "gone", "k", &"x".repeat(3000));
    ok(&["trees", "--db", &db, "--drop", "gone"]);
    let out = ok(&["check", "--db", &db]);
    assert!(out.contains("ok: no faults found"), "{out}");
}

/// Runs `args` (a `--json` command line), expects exit status `status` and nothing on
/// stderr, and returns stdout parsed: it must be exactly one JSON document.
#[track_caller]
fn json(status: i32, args: &[&str]) -> serde_json::Value {
    let o = run(args);
    assert_eq!(o.status.code(), Some(status), "{}", describe(args, &o));
    assert!(o.stderr.is_empty(), "{}", describe(args, &o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}\n{}", describe(args, &o)))
}

/// The `(name, keys)` of the trees of a `stats --json` or `check --json` object.
fn tree_keys(object: &serde_json::Value) -> Vec<(String, u64)> {
    let trees = object["trees"].as_array().unwrap_or_else(|| panic!("no trees: {object}"));
    trees
        .iter()
        .map(|t| (t["name"].as_str().unwrap().to_owned(), t["keys"].as_u64().unwrap()))
        .collect()
}

/// `stats --json` and `check --json` print one JSON object holding the text's numbers, as
/// numbers: every tree with its keys (its name unescaped), the pages, the pool, the log.
#[test]
fn stats_and_check_json_carry_the_numbers() {
    let tmp = TempDir::new("json");
    let db = tmp.db();
    for i in 0..30 {
        put(&db, "numbers", &format!("k{i:03}"), "v");
    }
    put(&db, "tab\tname", "x", "y");
    put(&db, "tab\tname", "z", "y");

    let stats = json(0, &["stats", "--db", &db, "--json"]);
    assert_eq!(stats["directory"], db.as_str(), "{stats}");
    assert_eq!(stats["tree_count"], 2, "{stats}");
    assert_eq!(
        tree_keys(&stats),
        [("numbers".to_owned(), 30), ("tab\tname".to_owned(), 2)],
        "{stats}"
    );
    for tree in stats["trees"].as_array().unwrap() {
        assert_eq!(
            (&tree["depth"], &tree["leaf_pages"], &tree["fault_count"]),
            (&1.into(), &1.into(), &0.into()),
            "{stats}"
        );
    }
    assert_eq!((&stats["fault_count"], &stats["lost_page_count"]), (&0.into(), &0.into()));
    let file_bytes = fs::metadata(Path::new(&db).join("pages.ferrite")).unwrap().len();
    assert_eq!(stats["page_file"]["bytes"], file_bytes, "{stats}");
    assert_eq!(stats["page_file"]["pages"], file_bytes / 4096, "{stats}");
    let allocated = stats["pages"]["allocated"].as_u64().unwrap();
    assert!(allocated >= 5, "superblocks, catalog, two leaves: {stats}");
    assert_eq!(stats["pages"]["allocated_bytes"], allocated * 4096, "{stats}");
    let pool_pages = stats["pool"]["pages"].as_u64().unwrap();
    assert!(pool_pages >= 64 << 8, "the default pool, 64 MiB: {stats}");
    assert_eq!(stats["pool"]["bytes"], pool_pages * 4096, "{stats}");
    assert_eq!(stats["pool"]["direct_io"], true, "{stats}");
    // The text says the same.
    let text = ok(&["stats", "--db", &db]);
    assert!(text.contains(&format!("pages       {allocated} allocated")), "{text}");
    let quick = json(0, &["stats", "--db", &db, "--quick", "--json", "--no-direct"]);
    assert_eq!(quick["tree_count"], 2, "{quick}");
    assert_eq!(quick["pool"]["direct_io"], false, "{quick}");
    for skipped in ["trees", "fault_count", "lost_page_count"] {
        assert!(quick[skipped].is_null(), "{skipped}: {quick}");
    }

    let check = json(0, &["check", "--db", &db, "--json"]);
    assert_eq!((&check["ok"], &check["closed_cleanly"]), (&true.into(), &true.into()), "{check}");
    assert_eq!(check["faults"], serde_json::json!([]), "{check}");
    assert_eq!((&check["fault_count"], &check["lost_page_count"]), (&0.into(), &0.into()));
    assert_eq!(check["lost_page_ranges"], serde_json::json!([]), "{check}");
    assert_eq!(tree_keys(&check), tree_keys(&stats), "{check}");
    assert!(check["catalog"]["name"].is_null() && check["catalog"]["keys"].as_u64() >= Some(2));
    assert_eq!(check["pages"]["allocated"], allocated, "{check}");
    assert_eq!(check["objects"]["objects"], 0, "{check}");
    let log = &check["log"];
    assert_eq!(log["state"], "intact", "{check}");
    let wal = Path::new(&db).join("wal");
    assert_eq!(log["directory"], wal.to_str().unwrap(), "{check}");
    // After a clean close: the close's checkpoint, no commit to replay.
    assert_eq!((&log["segments"], &log["commits"]), (&1.into(), &0.into()), "{check}");
    assert_eq!(log["replayed_in_memory"], false, "{check}");
    let (checkpoint, end) = (log["checkpoint_position"].as_u64(), log["end_position"].as_u64());
    assert!(checkpoint.is_some() && checkpoint <= end, "{check}");
    let text = ok(&["check", "--db", &db]);
    let positions = format!("last checkpoint at position {}", checkpoint.unwrap());
    assert!(text.contains(&positions) && text.ends_with("ok: no faults found\n"), "{text}");
}

/// `check --json` of a directory with a node the walk cannot read: `ok` is false, the node's
/// fault and the lost pages' line are in `faults`, the lost pages in ranges, exit status 1.
#[test]
fn check_json_lists_the_faults_and_exits_1() {
    let tmp = TempDir::new("json-faults");
    let db = tmp.db();
    fill_tree_t(Path::new(&db), 3_000, |i| (format!("key{i:05}"), vec![b'v'; 100]));
    let healthy = json(0, &["check", "--db", &db, "--json"]);
    assert_eq!(tree_keys(&healthy), [("t".to_owned(), 3_000)], "{healthy}");
    assert_eq!(healthy["trees"][0]["depth"], 2, "{healthy}");

    let inner = damage_first_inner_node(Path::new(&db));

    let check = json(1, &["check", "--db", &db, "--json"]);
    assert_eq!(check["ok"], false, "{check}");
    let faults: Vec<&str> =
        check["faults"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    let fault_count = check["fault_count"].as_u64().unwrap();
    let lost = check["lost_page_count"].as_u64().unwrap();
    assert!(fault_count >= 1 && lost > 10, "{check}");
    assert_eq!(faults.len() as u64, fault_count + 1, "the faults, then the lost pages: {check}");
    assert!(faults[0].contains(&format!("page {inner}")), "the node's fault first: {check}");
    assert!(faults.last().unwrap().starts_with(&format!("{lost} pages neither in use nor free")));
    let ranges = check["lost_page_ranges"].as_array().unwrap();
    let in_ranges: u64 =
        ranges.iter().map(|r| r[1].as_u64().unwrap() - r[0].as_u64().unwrap() + 1).sum();
    assert_eq!(in_ranges, lost, "{check}");
    assert!(check["trees"][0]["fault_count"].as_u64() >= Some(1), "{check}");
    // The text reports the same faults, with the same exit status.
    let text = expect(1, &["check", "--db", &db]);
    let lines: Vec<String> = faults.iter().map(|f| format!("fault: {f}")).collect();
    let text_faults: Vec<&str> = text.lines().filter(|l| l.starts_with("fault: ")).collect();
    assert_eq!(text_faults, lines, "{text}");

    // stats counts the same faults while counting the keys.
    let stats = json(0, &["stats", "--db", &db, "--json"]);
    assert_eq!(
        (&stats["fault_count"], &stats["lost_page_count"]),
        (&fault_count.into(), &lost.into())
    );
}

#[test]
fn argument_errors_exit_2_and_help_exits_0() {
    for args in [
        vec![],
        vec!["frobnicate"],
        vec!["get", "--db", "x"],
        vec!["put", "--db", "x", "--tree", "t", "k"],
        vec!["scan", "--db", "x", "--tree", "t", "--limit", "many"],
        vec!["bench"],
        vec!["bench", "lookup", "--keys", "0"],
        vec!["bench", "io", "--bs", "100"],
        vec!["bench", "io", "--pattern", "backwards"],
        vec!["bench", "fill", "--committers", "2"],
        vec!["bench", "ycsb-a", "--sync"],
        vec!["bench", "ycsb-c", "--tier-mib", "8"],
        vec!["bench", "ycsb-c", "--theta", "1.5"],
        vec!["bench", "ycsb-c", "--tier", "t", "--tier-admission", "sometimes"],
        vec!["bench", "recovery", "--seconds", "1,,2"],
        vec!["bench", "recovery", "--checkpoint-mib", "0"],
        vec!["bench", "tpcc", "--affinity", "sideways"],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{}", describe(&args, &o));
        assert!(o.stdout.is_empty());
        let err = text(&o.stderr);
        assert!(err.starts_with("ferrite: ") && err.contains("usage: "), "{}", describe(&args, &o));
    }
    for args in [
        vec!["--help"],
        vec!["help", "scan"],
        vec!["put", "--help"],
        vec!["get", "--help"],
        vec!["del", "--help"],
        vec!["scan", "--help"],
        vec!["trees", "--help"],
        vec!["stats", "--help"],
        vec!["check", "--help"],
        vec!["bench", "--help"],
        vec!["bench", "lookup", "--help"],
        vec!["bench", "io", "--help"],
        vec!["bench", "recovery", "--help"],
        vec!["bench", "tpcc", "--help"],
    ] {
        let out = ok(&args);
        assert!(out.contains("Usage: ferrite"), "{out}");
    }
    assert!(!Path::new("x").exists());
}

/// Runs `bench lookup` and returns the fields of its result line, which must end stdout.
#[track_caller]
fn bench_lookup(args: &[&str]) -> (String, Vec<(String, String)>) {
    let mut all = vec!["bench", "lookup"];
    all.extend_from_slice(args);
    let out = ok(&all);
    let last = out.lines().last().unwrap_or("");
    assert!(out.ends_with('\n') && last.starts_with("result lookups_per_s="), "{out}");
    let fields = parse_result(last);
    (out, fields)
}

/// The `name=value` fields of a `result …` line.
#[track_caller]
fn parse_result(line: &str) -> Vec<(String, String)> {
    let rest = line.strip_prefix("result ").unwrap_or_else(|| panic!("not a result: {line}"));
    rest.split(' ')
        .map(|f| {
            let (name, value) =
                f.split_once('=').unwrap_or_else(|| panic!("field {f:?} in {line}"));
            (name.to_owned(), value.to_owned())
        })
        .collect()
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> &'a str {
    fields.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str()).unwrap_or("")
}

/// `bench fill --sync --committers N`: durable inserts from N committers, every one read
/// back; the result line names the workload, the committers and the usual figures, and
/// `--json` gets the same fields.
#[test]
fn bench_fill_sync_ends_with_a_result_line() {
    let tmp = TempDir::new("bench-sync");
    let db = tmp.db();
    let json = tmp.0.join("runs.jsonl");
    let args = [
        "bench",
        "fill",
        "--sync",
        "--committers",
        "4",
        "--store",
        "ferrite",
        "--db",
        &db,
        "--records",
        "800",
        "--cache-mib",
        "1",
        "--workers",
        "2",
        "--seconds",
        "30",
        "--no-ceiling",
        "--json",
        json.to_str().unwrap(),
    ];
    let out = ok(&args);
    let last = out.lines().last().unwrap_or("");
    assert!(last.starts_with("result store=ferrite workload=fill-sync ops_per_s="), "{out}");
    let fields = parse_result(last);
    for (name, want) in [
        ("ops", "800"),
        ("committers", "4"),
        ("sync", "1"),
        ("verified", "800"),
        ("mode", "tasks"),
        ("workers", "2"),
        ("tasks", "4"),
    ] {
        assert_eq!(field(&fields, name), want, "{name} in {out}");
    }
    for name in ["ops_per_s", "p50_us", "p99_us", "p999_us", "cpu_us_per_op"] {
        let value: f64 = field(&fields, name).parse().unwrap_or(-1.0);
        assert!(value >= 0.0, "{name} in {out}");
    }
    // The log's group commits: 800 commits went through at most 800 writes (plus the few a
    // checkpoint may ask for), each carrying at least one record.
    let writes: u64 = field(&fields, "log_writes").parse().unwrap_or(0);
    assert!((1..=810).contains(&writes), "log_writes in {out}");
    let per_write: f64 = field(&fields, "log_records_per_write").parse().unwrap_or(0.0);
    assert!(per_write >= 1.0, "log_records_per_write in {out}");
    let write_us: f64 = field(&fields, "log_write_us").parse().unwrap_or(0.0);
    assert!(write_us > 0.0, "log_write_us in {out}");
    assert!(out.contains("writes (group commits)"), "{out}");
    // The workers' time: the tasks' work is never nothing, idle is a share.
    let task_us: f64 = field(&fields, "worker_task_us_per_op").parse().unwrap_or(0.0);
    assert!(task_us > 0.0, "worker_task_us_per_op in {out}");
    for name in ["worker_submit_us_per_op", "worker_complete_us_per_op", "worker_evict_us_per_op"] {
        let value: f64 = field(&fields, name).parse().unwrap_or(-1.0);
        assert!(value >= 0.0, "{name} in {out}");
    }
    let idle: f64 = field(&fields, "worker_idle_pct").parse().unwrap_or(-1.0);
    assert!((0.0..=100.0).contains(&idle), "worker_idle_pct in {out}");
    assert!(out.contains("us polling tasks"), "{out}");
    // Ferrite's memory is its pool, dirty pages included: nothing beside it.
    let pool_mib: f64 = field(&fields, "cache_mib").parse().unwrap_or(0.0);
    assert_eq!(field(&fields, "mem_cache_mib").parse::<f64>().ok(), Some(pool_mib), "{out}");
    assert_eq!(field(&fields, "mem_write_buffers_mib"), "0.0", "{out}");
    assert_eq!(field(&fields, "mem_mib").parse::<f64>().ok(), Some(pool_mib), "{out}");
    assert!(out.contains("MiB of data held in memory"), "{out}");
    assert!(out.contains("durability=Sync"), "{out}");
    assert!(out.contains("read back after reopening"), "{out}");
    let runs = fs::read_to_string(&json).unwrap();
    assert!(runs.starts_with("{\"store\":\"ferrite\",\"workload\":\"fill-sync\""), "{runs}");
    assert!(runs.contains("\"committers\":4"), "{runs}");
    assert!(!Path::new(&format!("{db}-fill")).exists(), "the fill's directory is removed");
}

/// `bench tpcc` at the reduced scale: a short run on two workers prints the summary, the
/// consistency checks and a result line that begins with the fields scripts read; `--keep`
/// leaves the loaded database, which the next run reuses.
#[test]
fn bench_tpcc_prints_its_result_line_with_consistency_ok() {
    let tmp = TempDir::new("bench-tpcc");
    let db = tmp.db();
    let json = tmp.0.join("runs.jsonl");
    let args = [
        "bench",
        "tpcc",
        "--db",
        &db,
        "--reduced-scale",
        "--warehouses",
        "2",
        "--terminals-per-warehouse",
        "3",
        "--workers",
        "2",
        "--cache-mib",
        "16",
        "--seconds",
        "0.4",
        "--no-direct",
        "--keep",
        "--json",
        json.to_str().unwrap(),
    ];
    for round in 0..2 {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(0), "{}", describe(&args, &o));
        let out = text(&o.stdout);
        let last = out.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("result store=ferrite workload=tpcc warehouses=2 tx_per_s="),
            "{out}"
        );
        let fields = parse_result(last);
        let names: Vec<&str> = fields.iter().take(8).map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "store",
                "workload",
                "warehouses",
                "tx_per_s",
                "tpmc",
                "reads_per_tx",
                "writes_per_tx",
                "consistency"
            ]
        );
        assert_eq!(field(&fields, "consistency"), "ok", "{out}");
        assert_eq!(field(&fields, "scale"), "reduced", "{out}");
        assert!(field(&fields, "tx").parse::<u64>().unwrap() > 0, "{out}");
        assert!(out.contains("NOT TPC-C"), "{out}");
        assert!(out.contains("consistency after the run: ok"), "{out}");
        assert_eq!(out.contains("consistency after the load: ok"), round == 0, "{out}");
    }
    let runs = fs::read_to_string(&json).unwrap();
    assert_eq!(runs.lines().count(), 2);
    assert!(runs.starts_with("{\"store\":\"ferrite\",\"workload\":\"tpcc\""), "{runs}");
}

/// `bench recovery`: two short runs, each ended by a crash and a reopen; the table has a
/// row per run and the line comparing them, and a result line per run ends stdout with
/// every acknowledged key verified.
#[test]
fn bench_recovery_prints_a_row_and_a_result_line_per_run() {
    let tmp = TempDir::new("bench-recovery");
    let db = tmp.db();
    let json = tmp.0.join("runs.jsonl");
    let args = [
        "bench",
        "recovery",
        "--db",
        &db,
        "--seconds",
        "0.2,0.4",
        "--committers",
        "4",
        "--workers",
        "2",
        "--cache-mib",
        "16",
        "--checkpoint-mib",
        "1",
        "--json",
        json.to_str().unwrap(),
    ];
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&args, &o));
    let out = text(&o.stdout);
    let results: Vec<&str> = out.lines().filter(|l| l.starts_with("result ")).collect();
    assert_eq!(results.len(), 2, "{out}");
    assert!(out.lines().rev().take(2).all(|l| l.starts_with("result workload=recovery ")));
    for (line, seconds) in results.iter().zip(["0.2", "0.4"]) {
        let fields = parse_result(line);
        assert_eq!(field(&fields, "seconds"), seconds, "{out}");
        assert_eq!(field(&fields, "checkpoint_bytes"), "1048576", "{out}");
        let ops: u64 = field(&fields, "ops").parse().unwrap();
        assert!(ops > 0, "{out}");
        assert_eq!(field(&fields, "verified"), ops.to_string(), "{out}");
        for name in ["ops_per_s", "log_max_bytes", "replayed_bytes", "recovery_ms", "open_ms"] {
            let value: f64 = field(&fields, name).parse().unwrap_or(-1.0);
            assert!(value >= 0.0, "{name} in {out}");
        }
    }
    assert!(out.contains("longest (0.4 s) vs shortest (0.2 s) run:"), "{out}");
    assert!(out.contains("the checkpoint interval (1.0 MiB)"), "{out}");
    let rows = out.lines().filter(|l| l.trim_start().starts_with("0.2 s")).count()
        + out.lines().filter(|l| l.trim_start().starts_with("0.4 s")).count();
    assert_eq!(rows, 2, "{out}");
    assert!(text(&o.stderr).contains("giving the database up as a crash would"));
    let runs = fs::read_to_string(&json).unwrap();
    assert_eq!(runs.lines().count(), 2, "{runs}");
    assert!(!Path::new(&db).exists(), "the directory is removed without --keep");
}

#[test]
fn bench_lookup_small_run_ends_with_a_result_line() {
    let tmp = TempDir::new("bench");
    let dir = tmp.0.join("nested/bench");
    let dir = dir.to_str().unwrap();
    let (out, fields) =
        bench_lookup(&["--db", dir, "--keys", "20000", "--pool-mib", "1", "--seconds", "1"]);
    let rate: f64 = field(&fields, "lookups_per_s").parse().unwrap();
    assert!(rate > 0.0, "{out}");
    assert!(!field(&fields, "lookups_per_s").contains([',', '.']), "{out}");
    assert_eq!(field(&fields, "keys"), "20000");
    assert_eq!(field(&fields, "pool_mib"), "1");
    assert_eq!(field(&fields, "threads"), "1");
    assert_eq!(field(&fields, "reused"), "0");
    for name in ["data_mib", "reads_per_lookup", "p50_us", "p99_us", "load_s"] {
        let value: f64 = field(&fields, name).parse().unwrap_or(-1.0);
        assert!(value >= 0.0, "{name} in {out}");
    }
    assert!(!Path::new(dir).exists(), "the data directory is removed without --keep");
    assert!(!tmp.0.join("nested").exists(), "so is the parent the run created");
}

#[test]
fn bench_lookup_keep_reuses_the_data() {
    let tmp = TempDir::new("bench-keep");
    let dir = tmp.db();
    let args = ["--db", &dir, "--keys", "5000", "--pool-mib", "1", "--seconds", "0.4", "--keep"];
    let (_, first) = bench_lookup(&args);
    assert_eq!(field(&first, "reused"), "0");
    assert!(Path::new(&dir).join("pages.ferrite").exists());
    let (out, second) = bench_lookup(&args);
    assert_eq!(field(&second, "reused"), "1", "{out}");
    assert!(out.contains("reused"), "{out}");
    // Another key count reloads.
    let (_, third) = bench_lookup(&[
        "--db",
        &dir,
        "--keys",
        "6000",
        "--pool-mib",
        "1",
        "--seconds",
        "0.4",
        "--threads",
        "2",
    ]);
    assert_eq!(field(&third, "reused"), "0");
    assert_eq!(field(&third, "threads"), "2");
    assert!(!Path::new(&dir).exists(), "removed without --keep");
}

#[test]
fn bench_lookup_leaves_other_data_alone() {
    let tmp = TempDir::new("bench-foreign");
    let db = tmp.db();
    put(&db, "users", "alice", "1");
    let args =
        ["bench", "lookup", "--db", &db, "--keys", "100", "--pool-mib", "1", "--seconds", "0.2"];
    let o = run(&args);
    assert_eq!(o.status.code(), Some(2), "{}", describe(&args, &o));
    assert!(text(&o.stderr).contains("not the benchmark's"), "{}", describe(&args, &o));
    assert_eq!(ok(&["get", "--db", &db, "--tree", "users", "alice"]), "1\n");
}

/// The fields of the result line that must end `out`.
fn result_fields(out: &str) -> Vec<(String, String)> {
    let last = out.lines().last().unwrap_or("");
    assert!(out.ends_with('\n') && last.starts_with("result iops="), "{out}");
    parse_result(last)
}

#[test]
fn bench_io_measures_every_engine_and_ends_with_io_urings_result() {
    let tmp = TempDir::new("bench-io");
    let file = tmp.0.join("made/io.dat");
    let file = file.to_str().unwrap();
    let args = [
        "bench",
        "io",
        "--file",
        file,
        "--engine",
        "all",
        "--seconds",
        "0.3",
        "--size-mib",
        "8",
        "--depth",
        "16",
    ];
    // No fio here, whatever the machine has installed.
    let o =
        Command::new(env!("CARGO_BIN_EXE_ferrite")).args(args).env("PATH", "").output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", describe(&args, &o));
    let out = text(&o.stdout);
    let fields = result_fields(&out);
    assert_eq!(field(&fields, "engine"), "io_uring");
    assert_eq!(field(&fields, "depth"), "16");
    assert_eq!(field(&fields, "pattern"), "randread");
    assert!(field(&fields, "iops").parse::<f64>().unwrap() > 0.0, "{out}");
    assert_eq!(field(&fields, "fio_iops"), "");
    for engine in ["io_uring", "aio", "psync", "mmap"] {
        assert!(out.lines().any(|l| l.trim_start().starts_with(engine)), "{engine}: {out}");
    }
    assert!(out.contains("not found on PATH"), "{out}");
    assert!(!tmp.0.join("made").exists(), "the file and the directory it made are removed");
}

#[test]
fn bench_io_runs_fio_with_the_same_job_when_it_is_on_path() {
    let tmp = TempDir::new("bench-io-fio");
    // A stand-in for fio: records its arguments and prints a report of 1000 IOPS.
    let bin = tmp.0.join("bin");
    fs::create_dir_all(&bin).unwrap();
    let args_file = tmp.0.join("fio-args");
    let script = format!(
        "#!/bin/sh\necho \"$@\" >> '{}'\necho 'fio: a notice before the report'\n\
         echo '{{\"jobs\": [{{\"error\": 0, \"read\": {{\"iops\": 0, \"bw_bytes\": 0}}, \
         \"write\": {{\"iops\": 1000.0, \"bw_bytes\": 4096000, \"lat_ns\": {{\"percentile\": \
         {{\"50.000000\": 2000, \"99.000000\": 9000}}}}}}}}]}}'\n",
        args_file.display()
    );
    let fio = bin.join("fio");
    fs::write(&fio, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&fio, fs::Permissions::from_mode(0o755)).unwrap();
    let file = tmp.0.join("io.dat");
    let file = file.to_str().unwrap();
    let args = [
        "bench",
        "io",
        "--file",
        file,
        "--engine",
        "aio",
        "--pattern",
        "randwrite",
        "--bs",
        "8k",
        "--threads",
        "2",
        "--seconds",
        "0.3",
        "--size-mib",
        "4",
        "--keep",
    ];
    let o =
        Command::new(env!("CARGO_BIN_EXE_ferrite")).args(args).env("PATH", &bin).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", describe(&args, &o));
    let out = text(&o.stdout);
    let fields = result_fields(&out);
    assert_eq!(field(&fields, "engine"), "aio");
    assert_eq!(field(&fields, "fio_iops"), "1000");
    let iops: f64 = field(&fields, "iops").parse().unwrap();
    let ratio: f64 = field(&fields, "ratio").parse().unwrap();
    assert!((ratio - iops / 1000.0).abs() < 0.01 * ratio.max(1.0), "{out}");
    let recorded = fs::read_to_string(&args_file).unwrap();
    for expected in [
        format!("--filename={file}"),
        "--ioengine=libaio".into(),
        "--direct=1".into(),
        "--rw=randwrite".into(),
        "--bs=8192".into(),
        "--iodepth=64".into(),
        "--numjobs=2".into(),
        "--size=4194304".into(),
        "--time_based".into(),
        "--runtime=300ms".into(),
        "--output-format=json".into(),
    ] {
        assert!(recorded.split_whitespace().any(|a| a == expected), "{expected}: {recorded}");
    }
    // Kept, and still recognisably the benchmark's file.
    let mut head = [0u8; 32];
    fs::File::open(file).unwrap().read_exact(&mut head).unwrap();
    assert!(head.starts_with(b"ferrite bench io data file"), "{head:?}");
}

/// The files of a data directory as a crash leaves them: everything but the lock file.
fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to.join(entry.file_name()));
        } else if entry.file_name() != ferrite::LOCK_FILE_NAME {
            fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// A crash image with `puts` committed (synced) puts after its last checkpoint: the files of
/// a database copied while it is open. Its log is in `wal/000000.log`.
fn crash_image(tmp: &TempDir, puts: u64) -> PathBuf {
    let dir = tmp.0.join("live");
    let options = ferrite::Options { workers: 0, pool_bytes: 4 << 20, ..Default::default() };
    let db = ferrite::Db::open(&dir, options).unwrap();
    let tree = db.tree("t").unwrap();
    for i in 0..puts {
        tree.put(format!("key{i:03}").as_bytes(), format!("value {i}").as_bytes()).unwrap();
    }
    let image = tmp.0.join("image");
    copy_dir(&dir, &image);
    drop(tree);
    db.close().unwrap();
    image
}

/// A segment file's sectors (wal/segment.rs): 512 bytes each after a 4096-byte header, 16
/// bytes of framing (payload bytes used at 4) and 496 of the log stream.
const SECTOR: u64 = 512;
const PAYLOAD: u64 = 496;

/// The segment's start LSN (header bytes 16..24).
fn segment_start(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes[16..24].try_into().unwrap())
}

/// The file offset of log position `lsn` in a segment starting at `start`.
fn file_offset(start: u64, lsn: u64) -> u64 {
    4096 + (lsn - start) / PAYLOAD * SECTOR + 16 + (lsn - start) % PAYLOAD
}

/// Positions of the records from `from` to the end of the log in segment file `segment`
/// (slot 0), with their kinds (record.rs: length at byte 4, kind at byte 16).
fn records(segment: &Path, from: u64) -> Vec<(u64, u32, u8)> {
    let bytes = fs::read(segment).unwrap();
    let start = segment_start(&bytes);
    // The stream: each written sector's payload, up to the first partly used one.
    let mut stream = Vec::new();
    for sector in bytes[4096..].chunks_exact(SECTOR as usize) {
        let used = u16::from_le_bytes([sector[4], sector[5]]) as usize;
        stream.extend_from_slice(&sector[16..16 + used]);
        if used < PAYLOAD as usize {
            break;
        }
    }
    let mut found = Vec::new();
    let mut lsn = from;
    while ((lsn - start) as usize) + 20 <= stream.len() {
        let at = (lsn - start) as usize;
        let len = u32::from_le_bytes(stream[at + 4..at + 8].try_into().unwrap());
        let own = u64::from_le_bytes(stream[at + 8..at + 16].try_into().unwrap());
        if len < 20 || own != lsn {
            break;
        }
        found.push((lsn, len, stream[at + 16]));
        lsn += len as u64;
    }
    found
}

/// `ferrite check` on a crash image: the directory is checked read-only and its log verified
/// (the committed puts are there, waiting for replay); a byte flipped inside an early record
/// after the checkpoint is damage before the log's end: `check` fails naming the position and
/// the segment file, and opening the directory is refused with `LogCorrupt`.
#[test]
fn check_verifies_the_log_of_a_crash_image_and_fails_on_a_damaged_record() {
    let tmp = TempDir::new("check-log");
    let image = crash_image(&tmp, 12);
    let db = image.to_str().unwrap();
    let args = ["check", "--db", db];
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&args, &o));
    let out = text(&o.stdout);
    assert!(text(&o.stderr).contains("was not closed cleanly"), "{}", describe(&args, &o));
    // The tree's creation and the puts.
    assert!(out.contains(": 13 commits, "), "{out}");
    assert!(out.contains("log: replayed into memory for this check"), "{out}");
    assert!(out.contains("ok: no faults found"), "{out}");
    // As JSON: the same, the note about the unclean close still on stderr.
    let json_args = ["check", "--db", db, "--json"];
    let o = run(&json_args);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&json_args, &o));
    assert!(text(&o.stderr).contains("was not closed cleanly"), "{}", describe(&json_args, &o));
    let check: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((&check["ok"], &check["closed_cleanly"]), (&true.into(), &false.into()));
    assert_eq!(tree_keys(&check), [("t".to_owned(), 12)], "{check}");
    let log = &check["log"];
    assert_eq!((&log["state"], &log["commits"]), (&"intact".into(), &13.into()), "{check}");
    assert_eq!(log["replayed_in_memory"], true, "{check}");
    let checkpoint: u64 = out
        .split("last checkpoint at position ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no checkpoint position in {out}"));

    // Flip a byte in the middle of the second put's commit after the checkpoint (later
    // commits, each synced by a write of its own, follow it: not a torn tail).
    let damaged = tmp.0.join("damaged");
    copy_dir(&image, &damaged);
    let segment = damaged.join("wal").join("000000.log");
    let commits: Vec<(u64, u32, u8)> =
        records(&segment, checkpoint).into_iter().filter(|&(_, _, kind)| kind == 1).collect();
    assert_eq!(commits.len(), 13, "{commits:?}");
    let (lsn, len, _) = commits[2];
    let start = segment_start(&fs::read(&segment).unwrap());
    let mut file = fs::OpenOptions::new().read(true).write(true).open(&segment).unwrap();
    let flipped = lsn + len as u64 / 2;
    let offset = file_offset(start, flipped);
    // Damage is named by the sector that holds it: its file offset and log position.
    let sector_lsn = start + (flipped - start) / PAYLOAD * PAYLOAD;
    let sector_offset = 4096 + (flipped - start) / PAYLOAD * SECTOR;
    let mut byte = [0u8];
    file.seek(SeekFrom::Start(offset)).unwrap();
    file.read_exact(&mut byte).unwrap();
    file.seek(SeekFrom::Start(offset)).unwrap();
    file.write_all(&[byte[0] ^ 0x40]).unwrap();
    drop(file);

    let damaged_db = damaged.to_str().unwrap();
    let args = ["check", "--db", damaged_db];
    let o = run(&args);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&args, &o));
    let out = text(&o.stdout);
    let fault = format!(
        "fault: the write-ahead log is damaged: {} at byte {sector_offset} (log position \
         {sector_lsn}): sector checksum mismatch",
        segment.display()
    );
    assert!(out.contains(&fault), "{fault}\n{}", describe(&args, &o));
    assert!(out.contains("log: DAMAGED") && out.contains("FAILED: 1 fault found"), "{out}");
    // The same as JSON: the pages not checked (null), the log's damage the one fault.
    let check = json(1, &["check", "--db", damaged_db, "--json"]);
    assert_eq!(check["ok"], false, "{check}");
    let line = out.lines().find(|l| l.starts_with(&fault)).unwrap();
    let fault = &line["fault: ".len()..];
    assert_eq!(check["faults"], serde_json::json!([fault]), "{check}");
    assert_eq!(check["log"], serde_json::json!({"state": "damaged", "fault": fault}), "{check}");
    assert_eq!((&check["fault_count"], &check["lost_page_count"]), (&1.into(), &0.into()));
    for unchecked in ["closed_cleanly", "catalog", "trees", "pages", "objects"] {
        assert!(check[unchecked].is_null(), "{unchecked}: {check}");
    }

    match ferrite::Db::open(&damaged, ferrite::Options { workers: 0, ..Default::default() }) {
        Err(ferrite::Error::LogCorrupt { lsn: at, offset, path, .. }) => {
            assert_eq!((at, offset, path), (Some(sector_lsn), Some(sector_offset), segment));
        }
        other => panic!("opening a damaged log: {other:?}"),
    }
}

/// Exit status and stderr of `ferrite put` of `key` in tree "t" of `db`, `value` as value.
fn put_on_full_disk(db: &str, key: &str, value: &str) -> (Option<i32>, String) {
    let o = run(&["put", "--db", db, "--tree", "t", key, value]);
    (o.status.code(), text(&o.stderr))
}

/// On a full disk a put is logged (the log's segment is preallocated) but its close fails:
/// the change buffer takes the put, and draining it at close needs a page the page file
/// cannot grow to hold (ENOSPC). The exit status says what happened to the put: 0, with a
/// warning that it is durable; and every put that exited 0 is there once the disk has room
/// (../shared/repro/r4_enospc.sh). A `del` likewise. Runs as root only (it mounts a tmpfs).
#[test]
fn a_committed_change_exits_0_when_only_the_close_fails() {
    let tmp = TempDir::new("full-disk");
    // 200 values of a page each, then the page file cut to the next 64 KiB above the pages
    // in use: the next few new pages fit, then the page file must grow by 64 MiB.
    let value = "E".repeat(4000);
    let source = tmp.0.join("source");
    let options = ferrite::Options {
        workers: 0,
        pool_bytes: 4 << 20,
        durability: ferrite::Durability::None,
        // Segment files as small as allowed: the copy must fit on the small file system.
        log_segment_bytes: 1 << 20,
        // Other tests here spawn processes: a child forked while this test held the lock
        // keeps a copy of its descriptor, and the lock, until it execs (a CI run once failed
        // the reopen below so).
        lock_wait: std::time::Duration::from_secs(5),
        ..Default::default()
    };
    let db = ferrite::Db::open(&source, options.clone()).unwrap();
    let tree = db.tree("t").unwrap();
    for i in 1..=200 {
        tree.put(format!("k{i:03}").as_bytes(), value.as_bytes()).unwrap();
    }
    drop(tree);
    db.close().unwrap();
    let read_only = ferrite::Options { read_only: true, ..options };
    let db = ferrite::Db::open(&source, read_only).unwrap();
    let pages = db.stats().unwrap().pool.page_count;
    db.close().unwrap();
    let pages_file = fs::OpenOptions::new().write(true).open(source.join("pages.ferrite")).unwrap();
    pages_file.set_len(pages.div_ceil(16) * 16 * 4096).unwrap();
    drop(pages_file);

    // 8 MiB: the directory and new log segments fit, a 64 MiB page file does not.
    let Some(mount) = Tmpfs::mount(&tmp.0.join("mnt"), "8m") else { return };
    let dir = mount.path().join("db");
    copy_dir(&source, &dir);
    let db = dir.to_str().unwrap();
    let mut committed = Vec::new();
    let mut warned = 0;
    for i in 201..=220 {
        let key = format!("k{i:03}");
        let (status, stderr) = put_on_full_disk(db, &key, &value);
        match status {
            Some(0) => {
                if !stderr.is_empty() {
                    assert!(
                        stderr.starts_with(
                            "ferrite: warning: the put is durable (in the synced write-ahead \
                             log), but closing "
                        ) && stderr.contains("No space left on device")
                            && stderr.contains("which applies the put:"),
                        "{key}: {stderr}"
                    );
                    assert_eq!(stderr.lines().count(), 1, "{stderr}");
                    warned += 1;
                }
                committed.push(key);
            }
            // The put itself failed (its open, say): that is an error, and it says so.
            Some(2) => assert!(stderr.starts_with("ferrite: ") && !stderr.contains("warning")),
            other => panic!("{key}: exit status {other:?}: {stderr}"),
        }
    }
    assert!(warned > 0, "no close failed: the disk never filled up ({committed:?})");
    let args = ["del", "--db", db, "--tree", "t", "k001"];
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&args, &o));
    assert!(
        text(&o.stderr).starts_with("ferrite: warning: the del is durable"),
        "{}",
        text(&o.stderr)
    );

    let args = ["trees", "--db", db, "--create", "u"];
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&args, &o));
    let warning = "ferrite: warning: the creation of tree \"u\" is durable";
    assert!(text(&o.stderr).starts_with(warning), "{}", describe(&args, &o));

    // While the disk is full, reads work: the directory is recovered in memory.
    for key in &committed {
        assert_eq!(ok(&["get", "--db", db, "--tree", "t", key]), format!("{value}\n"), "{key}");
    }
    expect(1, &["get", "--db", db, "--tree", "t", "k001"]);
    let out = ok(&["check", "--db", db]);
    assert!(out.contains("ok: no faults found"), "{out}");

    // With room again, the next open for writing recovers the directory from its log.
    mount.resize("128m");
    put(db, "probe", "k", "v");
    for key in &committed {
        assert_eq!(ok(&["get", "--db", db, "--tree", "t", key]), format!("{value}\n"), "{key}");
    }
    expect(1, &["get", "--db", db, "--tree", "t", "k001"]);
    assert_eq!(ok(&["trees", "--db", db]), "probe\nt\nu\n");
    let out = ok(&["check", "--db", db]);
    assert!(out.contains("ok: no faults found"), "{out}");
}

/// `ferrite ARGS` run by the shell with `redirect` applied to it (`>&-` closes stdout).
fn run_redirected(redirect: &str, args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("exec \"$0\" \"$@\" {redirect}"))
        .arg(env!("CARGO_BIN_EXE_ferrite"))
        .args(args)
        .output()
        .expect("running sh")
}

/// A command that prints fails (exit status 2) when its output cannot be written: stdout
/// closed (Rust's runtime put /dev/null in its place, and the output vanished with exit
/// status 0), opened read-only (writes fail with EBADF, which `io::Stdout` ignores), or
/// a full device. It fails before it starts: a benchmark does not run for nothing. A
/// command that prints nothing does not care.
#[test]
fn a_command_whose_output_cannot_be_written_fails() {
    let tmp = TempDir::new("stdout");
    let db = tmp.db();
    put(&db, "t", "k", "v");
    let bench_dir = tmp.0.join("bench");
    let bench_dir = bench_dir.to_str().unwrap();
    let printing: [Vec<&str>; 10] = [
        vec!["get", "--db", &db, "--tree", "t", "k"],
        vec!["get", "--db", &db, "--tree", "t", "absent"],
        vec!["scan", "--db", &db, "--tree", "t"],
        vec!["trees", "--db", &db],
        vec!["stats", "--db", &db],
        vec!["check", "--db", &db],
        vec!["stats", "--db", &db, "--json"],
        vec!["check", "--db", &db, "--json"],
        vec!["--help"],
        vec!["bench", "lookup", "--db", bench_dir, "--keys", "100", "--seconds", "0.1"],
    ];
    for (redirect, reason) in [
        (">&-", "writing the output failed: standard output is closed"),
        ("1</dev/null", "writing the output failed: standard output is not open for writing"),
        (">/dev/full", "writing the output failed: No space left on device"),
    ] {
        for args in &printing {
            let o = run_redirected(redirect, args);
            let what = format!("{redirect}\n{}", describe(args, &o));
            assert_eq!(o.status.code(), Some(2), "{what}");
            assert!(text(&o.stderr).starts_with(&format!("ferrite: {reason}")), "{what}");
        }
        assert!(!Path::new(bench_dir).exists(), "the benchmark ran ({redirect})");
    }
    // Commands that print nothing run as usual.
    for args in [
        vec!["put", "--db", &db, "--tree", "t", "k2", "v2"],
        vec!["del", "--db", &db, "--tree", "t", "k"],
        vec!["trees", "--db", &db, "--create", "u"],
    ] {
        let o = run_redirected(">&-", &args);
        assert_eq!(o.status.code(), Some(0), "{}", describe(&args, &o));
    }
    assert_eq!(ok(&["scan", "--db", &db, "--tree", "t"]), "k2\tv2\n");
    // /dev/null opened for writing is a place to print to.
    let o = run_redirected(">/dev/null", &["get", "--db", &db, "--tree", "t", "k2"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

/// A reader that goes away (`ferrite scan | head -n 1`) ends a command quietly, status 0.
#[test]
fn scan_into_a_closed_pipe_stops_quietly() {
    let tmp = TempDir::new("pipe");
    let db = tmp.db();
    let source = tmp.0.join("db");
    let value = b"a value long enough to fill a pipe";
    fill_tree_t(&source, 20_000, |i| (format!("key{i:06}"), value.to_vec()));
    let o = Command::new("bash")
        .arg("-c")
        .arg("set -o pipefail; \"$0\" \"$@\" | head -n 1")
        .arg(env!("CARGO_BIN_EXE_ferrite"))
        .args(["scan", "--db", &db, "--tree", "t"])
        .output()
        .expect("running bash");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "key000000\ta value long enough to fill a pipe\n");
    assert!(o.stderr.is_empty(), "{}", text(&o.stderr));
}

/// The number a `result` line gives `name`.
#[track_caller]
fn number_field(result: &str, name: &str) -> f64 {
    let prefix = format!(" {name}=");
    let at = result.find(&prefix).unwrap_or_else(|| panic!("{name} in {result}"));
    result[at + prefix.len()..].split(' ').next().unwrap().parse().unwrap()
}

/// `--tier FILE` puts a second cache tier under Ferrite's pool: the run says how it was used,
/// and its result line carries the tier's fields (which every run has, zeros without one).
#[test]
fn bench_with_a_tier_reports_its_use() {
    let tmp = TempDir::new("bench-tier");
    let db = tmp.db();
    let tier = tmp.0.join("tier.cache");
    let tier = tier.to_str().unwrap();
    let args = [
        "bench",
        "ycsb-c",
        "--db",
        &db,
        "--records",
        "60000",
        "--cache-mib",
        "1",
        "--seconds",
        "1",
        "--workers",
        "1",
        "--tier",
        tier,
        "--tier-mib",
        "8",
        "--tier-admission",
        "all",
        "--theta",
        "0.8",
        "--no-ceiling",
    ];
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&args, &o));
    let out = text(&o.stdout);
    assert!(out.contains("tier use"), "{}", describe(&args, &o));
    let result = out.lines().last().unwrap();
    let field = |name: &str| number_field(result, name);
    assert!(field("tier_hits") > 0.0, "{result}");
    assert!(field("tier_write_mib") > 0.0 && field("obp") > 0.0, "{result}");
    assert!(field("tier_misses") >= 0.0 && field("theta") == 0.8, "{result}");
    assert!(field("obp_windows_over") <= field("obp_windows") && field("obp_peak") >= 0.0);
    // Ferrite's lookup benchmark takes the same flags and gives the same fields (here with
    // a block medium: its copies read and written through the workers' rings).
    let args = [
        "bench",
        "lookup",
        "--db",
        &db,
        "--keys",
        "60000",
        "--pool-mib",
        "1",
        "--seconds",
        "1",
        "--workers",
        "1",
        "--tier",
        tier,
        "--tier-mib",
        "8",
        "--tier-admission",
        "all",
        "--tier-medium",
        "block",
    ];
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&args, &o));
    let out = text(&o.stdout);
    assert!(out.contains("tier use"), "{}", describe(&args, &o));
    let result = out.lines().last().unwrap();
    let field = |name: &str| number_field(result, name);
    assert!(field("tier_hits") > 0.0 && field("tier_write_mib") > 0.0, "{result}");
    // Without a tier the fields are there, zero.
    let args =
        ["bench", "ycsb-c", "--db", &db, "--records", "3000", "--seconds", "0.2", "--no-ceiling"];
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&args, &o));
    let out = text(&o.stdout);
    let result = out.lines().last().unwrap();
    assert!(
        result.contains(
            " tier_hits=0 tier_misses=0 obp=0.000 tier_write_mib=0.0 theta=0.99 obp_peak=0.000 \
             obp_windows=0 obp_windows_over=0 "
        ),
        "{result}"
    );
}

/// WiredTiger and LMDB have no second cache tier: `--tier` on them is refused before anything
/// runs, naming the store; so are Ferrite's tier options on RocksDB's tiers, and a compare
/// with a tier over stores that include one without.
#[test]
fn bench_tier_on_a_store_without_one_is_refused() {
    let tmp = TempDir::new("bench-tier-refused");
    let db = tmp.db();
    let tier = tmp.0.join("tier");
    let tier = tier.to_str().unwrap();
    for (args, message) in [
        (
            vec!["bench", "ycsb-c", "--store", "lmdb", "--db", &db, "--tier", tier],
            "--tier: lmdb has no second cache tier",
        ),
        (
            vec!["bench", "ycsb-c", "--store", "wiredtiger", "--db", &db, "--tier", tier],
            "--tier: wiredtiger has no second cache tier",
        ),
        (
            vec!["bench", "ycsb-c", "--store", "rocksdb", "--tier", tier, "--tier-latency-ns", "9"],
            "--tier-latency-ns is for Ferrite's tier",
        ),
        (
            vec!["bench", "compare", "quick", "--stores", "ferrite,lmdb", "--tier", tier],
            "--tier: lmdb has no second cache tier",
        ),
        (
            vec!["bench", "ycsb-c", "--store", "rocksdb", "--rocksdb-tier", "persistent"],
            "required arguments were not provided:\n  --tier <FILE>",
        ),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{}", describe(&args, &o));
        assert!(text(&o.stderr).contains(message), "{}", describe(&args, &o));
    }
    assert!(!tmp.0.join("db").exists() && !tmp.0.join("tier").exists());
}

/// RocksDB's tiers, secondary (the default) and persistent (in the directory `--tier`, made
/// for the run and removed after it): the run says which, and its result line counts the
/// tier's hits.
#[cfg(feature = "peers")]
#[test]
fn bench_with_a_rocksdb_tier_reports_its_use() {
    let tmp = TempDir::new("bench-rocksdb-tier");
    let db = tmp.db();
    let tier = tmp.0.join("tier");
    let tier = tier.to_str().unwrap();
    for (kind, option) in [
        ("secondary", "secondary_cache=CompressedSecondaryCache 104857600 B"),
        ("persistent", "persistent_cache=NewPersistentCache(path="),
    ] {
        let args = [
            "bench",
            "ycsb-c",
            "--store",
            "rocksdb",
            "--db",
            &db,
            "--records",
            "60000",
            "--cache-mib",
            "1",
            "--seconds",
            "1",
            "--threads",
            "2",
            "--tier",
            tier,
            "--tier-mib",
            "100",
            "--rocksdb-tier",
            kind,
            "--no-ceiling",
            "--no-direct",
            "--keep",
        ];
        let o = run(&args);
        assert_eq!(o.status.code(), Some(0), "{}", describe(&args, &o));
        let out = text(&o.stdout);
        assert!(out.contains(option) && out.contains("tier use"), "{}", describe(&args, &o));
        let result = out.lines().last().unwrap();
        let hits = result.split(' ').find_map(|f| f.strip_prefix("tier_hits=")).unwrap();
        assert!(hits.parse::<u64>().unwrap() > 0, "{kind}: {result}");
        assert!(!tmp.0.join("tier").exists(), "{kind}: the tier directory is removed");
    }
}

/// Where a benchmark's results go is opened before it runs: `--json` in a directory that does
/// not exist, or `--out` under a regular file, fails at once (exit status 2, naming the path)
/// instead of after the whole run; nothing was loaded.
#[test]
fn bench_output_paths_are_checked_before_the_run() {
    let tmp = TempDir::new("bench-paths");
    let db = tmp.db();
    let json = tmp.0.join("missing/runs.jsonl");
    let json = json.to_str().unwrap();
    for args in [
        vec!["bench", "fill", "--db", &db, "--records", "100", "--no-ceiling", "--json", json],
        vec!["bench", "ycsb-c", "--db", &db, "--records", "100", "--no-ceiling", "--json", json],
        vec!["bench", "fill", "--sync", "--db", &db, "--records", "100", "--json", json],
        vec!["bench", "lookup", "--db", &db, "--keys", "100", "--seconds", "0.1", "--json", json],
        vec!["bench", "recovery", "--db", &db, "--seconds", "0.1", "--json", json],
    ] {
        let started = std::time::Instant::now();
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{}", describe(&args, &o));
        let expected = format!(
            "ferrite: bench: opening --json {json} for appending (checked before the run): No \
             such file or directory"
        );
        assert!(text(&o.stderr).contains(&expected), "{}", describe(&args, &o));
        assert!(o.stdout.is_empty(), "{}", describe(&args, &o));
        assert!(started.elapsed().as_secs() < 10, "{}", describe(&args, &o));
        for dir in [db.clone(), format!("{db}-fill")] {
            assert!(!Path::new(&dir).exists(), "{dir} was made: {}", describe(&args, &o));
        }
    }
    // A file that exists takes the runs' objects after what it holds: opening it changes
    // nothing.
    let kept = tmp.0.join("kept.jsonl");
    fs::write(&kept, "{}\n").unwrap();
    let foreign = tmp.0.join("foreign");
    fs::create_dir_all(&foreign).unwrap();
    fs::write(foreign.join("hello.txt"), "hi").unwrap();
    let (foreign, kept_path) = (foreign.to_str().unwrap(), kept.to_str().unwrap());
    let args = ["bench", "recovery", "--db", foreign, "--seconds", "0.1", "--json", kept_path];
    let o = run(&args);
    assert_eq!(o.status.code(), Some(2), "{}", describe(&args, &o));
    assert!(text(&o.stderr).contains("was not made by ferrite bench"), "{}", describe(&args, &o));
    assert_eq!(fs::read_to_string(&kept).unwrap(), "{}\n");

    let file = tmp.0.join("a-file");
    fs::write(&file, "").unwrap();
    for out in [file.join("results"), file.clone()] {
        let out = out.to_str().unwrap();
        let args = ["bench", "compare", "quick", "--stores", "ferrite", "--db", &db, "--out", out];
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{}", describe(&args, &o));
        let expected = format!("ferrite: bench: creating --out {out} (checked before the runs): ");
        assert!(text(&o.stderr).starts_with(&expected), "{}", describe(&args, &o));
        assert!(!Path::new(&db).exists(), "{}", describe(&args, &o));
    }
}

/// `bench compare serve` sweeps the offered rates on `ferrite serve` (and memcached when
/// installed), each store loaded once: a table row per rate, the bound line per store, the
/// JSON lines and two charts, and its result line.
#[test]
fn bench_compare_serve_sweeps_the_rates() {
    let tmp = TempDir::new("compare-serve");
    let db = tmp.db();
    let out_dir = tmp.0.join("results");
    let out_dir = out_dir.to_str().unwrap();
    let args = [
        "bench",
        "compare",
        "serve",
        "--db",
        &db,
        "--out",
        out_dir,
        "--records",
        "2000",
        "--cache-mib",
        "16",
        "--seconds",
        "0.3",
    ];
    let out = ok(&args);
    let stores =
        if ferrite_bench_memcached() { "ferrite,ferrite,memcached" } else { "ferrite,ferrite" };
    let runs = 6 * stores.split(',').count();
    let last = out.lines().last().unwrap_or("");
    assert_eq!(last, format!("result suite=serve stores={stores} runs={runs} failed=0"), "{out}");
    for rate in ["2500", "5000", "10000", "20000", "40000", "80000"] {
        assert!(out.contains(&format!("| {rate} |")), "{out}");
    }
    for label in ["ferrite (sync)", "ferrite (none)"] {
        assert!(out.contains(&format!("- {label}: highest offered rate with p99 ≤ 1000 µs")));
    }
    let md = Path::new(out_dir).join("serve.md");
    assert!(out.starts_with(&fs::read_to_string(&md).unwrap()), "the tables first: {out}");
    let jsonl = fs::read_to_string(Path::new(out_dir).join("serve.jsonl")).unwrap();
    assert_eq!(jsonl.lines().count(), runs);
    for chart in ["serve-p99.svg", "serve-ops.svg"] {
        assert!(fs::read_to_string(Path::new(out_dir).join(chart)).unwrap().starts_with("<svg"));
    }
    assert!(!Path::new(&db).join("bench-serve-ferrite").exists(), "the data is removed");
}

/// Whether `memcached` runs here (as `bench serve` finds it).
fn ferrite_bench_memcached() -> bool {
    std::process::Command::new("memcached").arg("-V").output().is_ok_and(|o| o.status.success())
}

/// `bench fill --keep` keeps the fill's directory (DIR-fill), as `bench lookup --keep` keeps
/// its own: a Ferrite data directory that `ferrite check` passes, holding the keys the fill
/// inserted. The next fill empties it first and, without --keep, removes it.
#[test]
fn bench_fill_keep_keeps_the_fills_directory() {
    let tmp = TempDir::new("bench-fill-keep");
    let db = tmp.db();
    let fill_dir = format!("{db}-fill");
    for sync in [false, true] {
        let mut args = vec![
            "bench",
            "fill",
            "--db",
            &db,
            "--records",
            "300",
            "--cache-mib",
            "1",
            "--seconds",
            "30",
            "--workers",
            "1",
            "--no-ceiling",
            "--keep",
        ];
        if sync {
            args.push("--sync");
        }
        let out = ok(&args);
        let last = out.lines().last().unwrap_or("");
        let fields = parse_result(last);
        let inserts: u64 = field(&fields, "ops").parse().unwrap();
        assert!(inserts > 0, "{out}");
        assert!(
            out.contains(&format!("kept          {fill_dir} (--keep): the next fill")),
            "{out}"
        );
        let checked = ok(&["check", "--db", &fill_dir]);
        assert!(checked.contains("ok: no faults found"), "{checked}");
        let keys = checked.lines().find(|l| l.trim_start().starts_with("bench ")).unwrap_or("");
        assert_eq!(keys.split_whitespace().nth(1), Some(inserts.to_string().as_str()), "{checked}");
    }
    let args = ["bench", "fill", "--db", &db, "--records", "300", "--cache-mib", "1"];
    let out = ok(&[&args[..], &["--seconds", "30", "--workers", "1", "--no-ceiling"]].concat());
    assert!(!out.contains("kept"), "{out}");
    assert!(!Path::new(&fill_dir).exists(), "removed without --keep");
}

/// A node `check` cannot read hides every page below it from the walk; those pages are lost
/// (neither in use nor free). The node's fault comes first, and the lost pages follow as one
/// line of ranges, not one line each.
#[test]
fn check_names_the_corrupt_node_first_and_summarises_the_lost_pages() {
    let tmp = TempDir::new("check-lost");
    let db = tmp.db();
    fill_tree_t(Path::new(&db), 20_000, |i| (format!("key{i:06}"), vec![b'v'; 100]));

    let inner = damage_first_inner_node(Path::new(&db));

    let args = ["check", "--db", &db];
    let o = run(&args);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&args, &o));
    let out = text(&o.stdout);
    let faults: Vec<&str> = out.lines().filter(|l| l.starts_with("fault: ")).collect();
    let lost: Vec<&&str> = faults.iter().filter(|l| l.contains("(lost)")).collect();
    assert_eq!(lost.len(), 1, "{out}");
    assert_eq!(faults.last(), lost.first().copied(), "the lost pages come last: {out}");
    assert!(faults[0].contains(&format!("page {inner}")), "the node's fault first: {out}");
    let line = lost[0];
    let pages_lost: u64 = line["fault: ".len()..].split(' ').next().unwrap().parse().unwrap();
    assert!(pages_lost > 10, "{out}");
    assert!(line.contains(" pages neither in use nor free (lost) (a node the walk"), "{out}");
    assert!(line.len() < 300, "{line}");
    let causes = faults.len() - 1;
    let plural = if causes == 1 { "" } else { "s" };
    let failed = format!("FAILED: {causes} fault{plural} and {pages_lost} lost pages found");
    assert_eq!(out.lines().last(), Some(failed.as_str()), "{out}");
}

/// Commands beside each other: readers share the directory, and a command that meets
/// another holding it waits for it (a `get` beside a `put` loop failed 115 times in 150 on
/// 2026-11-24: every open took the lock exclusively and none waited).
#[test]
fn gets_beside_a_put_loop_all_succeed() {
    let tmp = TempDir::new("concurrent");
    let db = tmp.db();
    put(&db, "t", "k", "v");
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            for i in 0..30 {
                put(&db, "t", &format!("w{i}"), "x");
            }
        })
    };
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let db = db.clone();
            std::thread::spawn(move || {
                for _ in 0..12 {
                    assert_eq!(ok(&["get", "--db", &db, "--tree", "t", "k"]), "v\n");
                }
            })
        })
        .collect();
    writer.join().unwrap();
    for reader in readers {
        reader.join().unwrap();
    }
    assert_eq!(ok(&["scan", "--db", &db, "--tree", "t"]).lines().count(), 31);
}

// ---------------------------------------------------------------------------------------
// Objects: values of any size, streamed from and to files, written and read at offsets.

/// Runs `args` with `input` on its standard input.
fn run_with_stdin(args: &[&str], input: &[u8]) -> Output {
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running ferrite");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    // Written from a thread: a command that does not read it all must not block the test.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let o = child.wait_with_output().expect("waiting for ferrite");
    writer.join().unwrap();
    o
}

/// `len` bytes of a xorshift sequence from `seed`: every byte value, no pattern a page
/// boundary could hide.
fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Runs `args`, expects exit status 0, returns stdout's raw bytes.
#[track_caller]
fn ok_bytes(args: &[&str]) -> Vec<u8> {
    let o = run(args);
    assert_eq!(o.status.code(), Some(0), "{}", describe(args, &o));
    o.stdout
}

/// The fields of the `result` line that must end `out`.
#[track_caller]
fn last_result(out: &str) -> Vec<(String, String)> {
    let last = out.lines().last().unwrap_or("");
    assert!(last.starts_with("result "), "the last line is not a result line:\n{out}");
    parse_result(last)
}

/// A value of 1 MiB and 3 bytes goes in from a file (streamed through `put_from`) and comes
/// back out byte for byte, into a file and raw on stdout (streamed through `get_into`).
#[test]
fn put_value_file_then_get_output_round_trips_a_big_value() {
    let tmp = TempDir::new("object-file");
    let db = tmp.db();
    let value = random_bytes((1 << 20) + 3, 0x5eed);
    let source = tmp.0.join("value.bin");
    fs::write(&source, &value).unwrap();
    let source = source.to_str().unwrap();
    assert_eq!(ok(&["put", "--db", &db, "--tree", "t", "big", "--value-file", source]), "");
    let copy = tmp.0.join("copy.bin");
    let copy = copy.to_str().unwrap();
    // Whatever the file held before is replaced.
    fs::write(copy, vec![b'x'; 3 << 20]).unwrap();
    assert_eq!(ok(&["get", "--db", &db, "--tree", "t", "big", "--output", copy]), "");
    assert!(fs::read(copy).unwrap() == value, "the copy differs from the value put");
    // `-`: raw bytes on stdout, no newline, nothing escaped (the value is not UTF-8).
    let out = ok_bytes(&["get", "--db", &db, "--tree", "t", "big", "--output", "-"]);
    assert!(out == value, "stdout ({} bytes) differs from the value put", out.len());
    // Without --output, get prints as before (here in hex, and a newline).
    let printed = ok_bytes(&["get", "--db", &db, "--tree", "t", "--hex", "626967"]);
    assert_eq!(printed.len(), value.len() * 2 + 1);
    // With --output PATH nothing is printed: a closed stdout does not matter.
    fs::remove_file(copy).unwrap();
    let args = ["get", "--db", &db, "--tree", "t", "big", "--output", copy];
    let o = run_redirected(">&-", &args);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&args, &o));
    assert!(fs::read(copy).unwrap() == value);
    // A small value put as usual comes out raw too.
    put(&db, "t", "small", "tiny\n");
    assert_eq!(ok_bytes(&["get", "--db", &db, "--tree", "t", "small", "--output", "-"]), b"tiny\n");
    let out = ok(&["check", "--db", &db]);
    assert!(out.contains("ok: no faults found"), "{out}");
}

/// `write-at` at unaligned offsets (from a file, an argument, hex, stdin; one file bigger
/// than a piece of 8 MiB) and `read-at` of ranges of it, checked against a model `Vec`.
#[test]
fn write_at_unaligned_then_read_at_matches_a_model() {
    let tmp = TempDir::new("object-at");
    let db = tmp.db();
    let mut model: Vec<u8> = Vec::new();
    let mut write = |offset: usize, bytes: &[u8]| {
        if model.len() < offset + bytes.len() {
            model.resize(offset + bytes.len(), 0);
        }
        model[offset..offset + bytes.len()].copy_from_slice(bytes);
    };
    let file = tmp.0.join("piece.bin");
    let file = file.to_str().unwrap();

    // A new key: zeros up to the offset, then the file's bytes.
    let first = random_bytes(10_000, 1);
    fs::write(file, &first).unwrap();
    ok(&["write-at", "--db", &db, "--tree", "t", "obj", "--offset", "4097", "--value-file", file]);
    write(4097, &first);
    // Across the first page boundary, as an argument.
    ok(&["write-at", "--db", &db, "--tree", "t", "obj", "--offset", "4093", "straddle"]);
    write(4093, b"straddle");
    // KEY and VALUE in hex; an offset with a binary unit (8k = 8192).
    ok(&["write-at", "--db", &db, "--tree", "t", "--hex", "6f626a", "--offset", "8k", "00ff0a5c"]);
    write(8192, &[0x00, 0xff, 0x0a, 0x5c]);
    // From stdin, past the end (the value grows, the gap reads as zeros).
    let tail = random_bytes(5000, 2);
    let args =
        ["write-at", "--db", &db, "--tree", "t", "obj", "--offset", "20001", "--value-file", "-"];
    let o = run_with_stdin(&args, &tail);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&args, &o));
    write(20_001, &tail);
    // More than a piece: 8 MiB and 4099 bytes from an odd offset, written in two pieces.
    let big = random_bytes((8 << 20) + 4099, 3);
    fs::write(file, &big).unwrap();
    ok(&["write-at", "--db", &db, "--tree", "t", "obj", "--offset", "12345", "--value-file", file]);
    write(12_345, &big);

    let read = |offset: usize, length: usize| {
        let (offset, length) = (offset.to_string(), length.to_string());
        ok_bytes(&[
            "read-at", "--db", &db, "--tree", "t", "obj", "--offset", &offset, "--length", &length,
        ])
    };
    let len = model.len();
    for (offset, length) in [
        (0, 1),
        (4090, 20),
        (4097, 10_000),
        (8190, 8),
        (12_344, 3),
        (19_999, 7000),
        (12_345, big.len()),
        ((8 << 20) + 1, 4096 * 3 + 1),
        (len - 10, 10),
    ] {
        assert!(read(offset, length) == model[offset..offset + length], "{offset}+{length}");
    }
    // The whole value, in pieces, equals the model; so does get's streamed copy.
    assert!(read(0, len) == model, "the whole value differs from the model");
    assert!(ok_bytes(&["get", "--db", &db, "--tree", "t", "obj", "--output", "-"]) == model);
    // A range past the end is cut short there (with a note), or empty.
    let from = (len - 5).to_string();
    let args = ["read-at", "--db", &db, "--tree", "t", "obj", "--offset", &from, "--length", "1m"];
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&args, &o));
    assert_eq!(o.stdout, model[len - 5..]);
    assert!(text(&o.stderr).contains("5 of the 1048576 bytes"), "{}", describe(&args, &o));
    assert!(read(len, 10).is_empty() && read(len + 4096, 10).is_empty());
    // --output PATH.
    let out = tmp.0.join("range.bin");
    let out = out.to_str().unwrap();
    ok(&[
        "read-at", "--db", &db, "--tree", "t", "obj", "--offset", "4093", "--length", "4k",
        "--output", out,
    ]);
    assert!(fs::read(out).unwrap() == model[4093..4093 + 4096]);

    let stat = last_result(&ok(&["stat", "--db", &db, "--tree", "t", "obj"]));
    assert_eq!(field(&stat, "size"), len.to_string());
    assert_eq!(field(&stat, "inline"), "false");
    let out = ok(&["check", "--db", &db]);
    assert!(out.contains("ok: no faults found"), "{out}");
}

/// `stat` prints a block, then a result line whose fields say the size and how the value is
/// stored.
#[test]
fn stat_ends_with_a_result_line() {
    let tmp = TempDir::new("object-stat");
    let db = tmp.db();
    put(&db, "t", "tiny", "hello");
    let out = ok(&["stat", "--db", &db, "--tree", "t", "tiny"]);
    let fields = last_result(&out);
    let names: Vec<&str> = fields.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        ["key", "size", "inline", "extents", "extent_pages", "fragments", "fragment_bytes"],
        "{out}"
    );
    assert_eq!(field(&fields, "key"), "tiny");
    assert_eq!(field(&fields, "size"), "5");
    assert_eq!(field(&fields, "inline"), "true");
    for name in ["extents", "extent_pages", "fragments", "fragment_bytes"] {
        assert!(field(&fields, name).parse::<u64>().is_ok(), "{name}: {out}");
    }
    assert!(out.lines().any(|l| l.starts_with("size ") && l.contains("5 bytes")), "{out}");
    assert!(out.lines().any(|l| l.starts_with("stored ") && l.contains("inline")), "{out}");

    // An object of 3 pages and 5 bytes: its size, not inline; --hex prints the key in hex.
    let value = random_bytes(3 * 4096 + 5, 7);
    let file = tmp.0.join("object.bin");
    fs::write(&file, &value).unwrap();
    let file = file.to_str().unwrap();
    ok(&["put", "--db", &db, "--tree", "t", "--hex", "00ff", "--value-file", file]);
    let out = ok(&["stat", "--db", &db, "--tree", "t", "--hex", "00ff"]);
    let fields = last_result(&out);
    assert_eq!(field(&fields, "key"), "00ff");
    assert_eq!(field(&fields, "size"), (3 * 4096 + 5).to_string());
    assert_eq!(field(&fields, "inline"), "false");
    assert!(out.contains("12,293 bytes (12.0 KiB)"), "{out}");
    // Its bytes are in extents and fragments.
    let pages: u64 = field(&fields, "extent_pages").parse().unwrap();
    let fragment_bytes: u64 = field(&fields, "fragment_bytes").parse().unwrap();
    assert!(pages * 4096 + fragment_bytes >= 3 * 4096 + 5, "{out}");
}

/// `--value-file -` reads standard input, byte for byte (a NUL, newlines, invalid UTF-8).
#[test]
fn value_file_dash_reads_stdin() {
    let tmp = TempDir::new("object-stdin");
    let db = tmp.db();
    let mut value = b"line one\nline\0two\r\n\xff\xfe\\".to_vec();
    value.extend(random_bytes(100_000, 9));
    let args = ["put", "--db", &db, "--tree", "t", "k", "--value-file", "-"];
    let o = run_with_stdin(&args, &value);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&args, &o));
    assert!(ok_bytes(&["get", "--db", &db, "--tree", "t", "k", "--output", "-"]) == value);
    // An empty stdin is an empty value.
    let args = ["put", "--db", &db, "--tree", "t", "empty", "--value-file", "-"];
    let o = run_with_stdin(&args, b"");
    assert_eq!(o.status.code(), Some(0), "{}", describe(&args, &o));
    assert_eq!(ok_bytes(&["get", "--db", &db, "--tree", "t", "empty", "--output", "-"]), b"");
    assert_eq!(ok(&["get", "--db", &db, "--tree", "t", "empty"]), "\n");
    // write-at from stdin, into the middle of the value.
    let args = ["write-at", "--db", &db, "--tree", "t", "k", "--offset", "5", "--value-file", "-"];
    let o = run_with_stdin(&args, b"\x00\x01\x02");
    assert_eq!(o.status.code(), Some(0), "{}", describe(&args, &o));
    value[5..8].copy_from_slice(b"\x00\x01\x02");
    assert!(ok_bytes(&["get", "--db", &db, "--tree", "t", "k", "--output", "-"]) == value);
}

/// VALUE and --value-file: exactly one. Both, or neither, is a usage error (exit status 2,
/// nothing created).
#[test]
fn value_and_value_file_are_mutually_exclusive() {
    let tmp = TempDir::new("object-args");
    let db = tmp.db();
    let file = tmp.0.join("v.bin");
    fs::write(&file, b"v").unwrap();
    let file = file.to_str().unwrap();
    for (args, needle) in [
        (
            vec!["put", "--db", &db, "--tree", "t", "k", "v", "--value-file", file],
            "cannot be used with",
        ),
        (
            vec!["put", "--db", &db, "--tree", "t", "--value-file", file, "k", "v"],
            "cannot be used with",
        ),
        (vec!["put", "--db", &db, "--tree", "t", "k"], "<VALUE> or --value-file <PATH>"),
        (
            vec![
                "write-at",
                "--db",
                &db,
                "--tree",
                "t",
                "k",
                "--offset",
                "0",
                "v",
                "--value-file",
                file,
            ],
            "cannot be used with",
        ),
        (
            vec!["write-at", "--db", &db, "--tree", "t", "k", "--offset", "0"],
            "<VALUE> or --value-file",
        ),
        (vec!["write-at", "--db", &db, "--tree", "t", "k", "v"], "--offset <N>"),
        (vec!["read-at", "--db", &db, "--tree", "t", "k", "--offset", "0"], "--length <N>"),
        (
            vec!["read-at", "--db", &db, "--tree", "t", "k", "--offset", "1x", "--length", "1"],
            "not a number of bytes",
        ),
        (vec!["get", "--db", &db, "--tree", "t", "k", "--output", ""], "must not be empty"),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{}", describe(&args, &o));
        assert!(o.stdout.is_empty(), "{}", describe(&args, &o));
        let err = text(&o.stderr);
        assert!(err.starts_with("ferrite: ") && err.contains(needle), "{}", describe(&args, &o));
        assert!(err.contains("usage: ferrite "), "{}", describe(&args, &o));
    }
    assert!(!Path::new(&db).exists(), "a refused command created the directory");
}

/// A --value-file that cannot be read is named, and nothing is created or changed.
#[test]
fn an_unreadable_value_file_is_named_and_changes_nothing() {
    let tmp = TempDir::new("object-unreadable");
    let db = tmp.db();
    let missing = tmp.0.join("missing.bin");
    let missing = missing.to_str().unwrap();
    let dir = tmp.0.to_str().unwrap();
    for args in [
        vec!["put", "--db", &db, "--tree", "t", "k", "--value-file", missing],
        vec!["write-at", "--db", &db, "--tree", "t", "k", "--offset", "0", "--value-file", missing],
        vec!["put", "--db", &db, "--tree", "t", "k", "--value-file", dir],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{}", describe(&args, &o));
        let err = text(&o.stderr);
        let named = format!("ferrite: reading {} failed: ", args.last().unwrap());
        assert!(err.starts_with(&named), "{}", describe(&args, &o));
        assert!(
            err.contains("No such file or directory") || err.contains("Is a directory"),
            "{}",
            describe(&args, &o)
        );
    }
    assert!(!Path::new(&db).exists(), "the directory was created for nothing");
    // An --output that cannot be written fails before anything is read.
    put(&db, "t", "k", "v");
    let nowhere = tmp.0.join("no/such/dir/out");
    let args = ["get", "--db", &db, "--tree", "t", "k", "--output", nowhere.to_str().unwrap()];
    let o = run(&args);
    assert_eq!(o.status.code(), Some(2), "{}", describe(&args, &o));
    assert!(
        text(&o.stderr).starts_with("ferrite: writing the output to "),
        "{}",
        describe(&args, &o)
    );
}

/// An absent key: exit status 1 and "not found" from every command that reads a value (as
/// `get`), nothing on stdout, and an --output file left as it was (or not created).
#[test]
fn object_commands_of_an_absent_key_exit_1() {
    let tmp = TempDir::new("object-absent");
    let db = tmp.db();
    put(&db, "t", "present", "v");
    let kept = tmp.0.join("kept.bin");
    fs::write(&kept, b"left alone").unwrap();
    let kept = kept.to_str().unwrap();
    let fresh = tmp.0.join("fresh.bin");
    let fresh = fresh.to_str().unwrap();
    for args in [
        vec!["get", "--db", &db, "--tree", "t", "absent"],
        vec!["get", "--db", &db, "--tree", "t", "absent", "--output", "-"],
        vec!["get", "--db", &db, "--tree", "t", "absent", "--output", kept],
        vec!["get", "--db", &db, "--tree", "t", "absent", "--output", fresh],
        vec!["read-at", "--db", &db, "--tree", "t", "absent", "--offset", "0", "--length", "10"],
        vec!["read-at", "--db", &db, "--tree", "t", "absent", "--offset", "0", "--length", "0"],
        vec![
            "read-at", "--db", &db, "--tree", "t", "absent", "--offset", "0", "--length", "1",
            "--output", kept,
        ],
        vec![
            "read-at", "--db", &db, "--tree", "t", "absent", "--offset", "0", "--length", "1",
            "--output", fresh,
        ],
        vec!["stat", "--db", &db, "--tree", "t", "absent"],
        vec!["stat", "--db", &db, "--tree", "t", "--hex", "00"],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(1), "{}", describe(&args, &o));
        assert!(o.stdout.is_empty(), "{}", describe(&args, &o));
        let err = text(&o.stderr);
        assert!(
            err.starts_with("ferrite: key ") && err.contains("not found"),
            "{}",
            describe(&args, &o)
        );
    }
    assert_eq!(fs::read(kept).unwrap(), b"left alone");
    assert!(!Path::new(fresh).exists(), "an absent key left an output file behind");
    // A tree that does not exist is an error, as for get.
    for args in [
        vec!["read-at", "--db", &db, "--tree", "nope", "k", "--offset", "0", "--length", "1"],
        vec!["stat", "--db", &db, "--tree", "nope", "k"],
        vec!["get", "--db", &db, "--tree", "nope", "k", "--output", fresh],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{}", describe(&args, &o));
        assert!(
            text(&o.stderr).starts_with("ferrite: no tree named \"nope\""),
            "{}",
            describe(&args, &o)
        );
    }
    assert!(!Path::new(fresh).exists(), "a failed get left an output file behind");
}

/// `read-at` and `stat` print, so they check standard output before they start (as `get`
/// does); `write-at` prints nothing, so a closed stdout does not stop it from being refused
/// for its own reasons.
#[test]
fn object_commands_that_print_check_their_output_first() {
    let tmp = TempDir::new("object-stdout");
    let db = tmp.db();
    put(&db, "t", "k", "v");
    for args in [
        vec!["read-at", "--db", &db, "--tree", "t", "k", "--offset", "0", "--length", "1"],
        vec![
            "read-at", "--db", &db, "--tree", "t", "k", "--offset", "0", "--length", "1",
            "--output", "-",
        ],
        vec!["get", "--db", &db, "--tree", "t", "k", "--output", "-"],
        vec!["stat", "--db", &db, "--tree", "t", "k"],
    ] {
        let o = run_redirected(">&-", &args);
        assert_eq!(o.status.code(), Some(2), "{}", describe(&args, &o));
        let expected = "ferrite: writing the output failed: standard output is closed";
        assert!(text(&o.stderr).starts_with(expected), "{}", describe(&args, &o));
    }
    let missing = tmp.0.join("missing");
    let args = ["write-at", "--db", &db, "--tree", "t", "k", "--offset", "0", "--value-file"];
    let mut args = args.to_vec();
    args.push(missing.to_str().unwrap());
    let o = run_redirected(">&-", &args);
    assert_eq!(o.status.code(), Some(2), "{}", describe(&args, &o));
    assert!(text(&o.stderr).starts_with("ferrite: reading "), "{}", describe(&args, &o));
}

/// `ferrite serve` out of file descriptors neither spins nor stops: a failed accept is
/// followed by a pause, and connections are accepted again once some close.
#[test]
fn serve_out_of_descriptors_pauses_its_accepts() {
    use std::io::{BufRead, BufReader, Read, Write};
    let tmp = TempDir::new("serve-emfile");
    let db = tmp.db();
    let script = format!(
        "ulimit -n 64 && exec {} serve --db {db} --listen 127.0.0.1:0 --workers 2 --memory-mib 32",
        env!("CARGO_BIN_EXE_ferrite")
    );
    /// The server, killed if the test fails before it stops it (else it would hold the
    /// test's output open).
    struct Server(std::process::Child);
    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut server = Server(
        std::process::Command::new("sh")
            .args(["-c", &script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let child = &mut server.0;
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let addr: std::net::SocketAddr =
        line.trim().strip_prefix("listening on ").expect(&line).parse().unwrap();
    // Another process cannot open the directory beside the server (after its 5 s wait): it
    // is told which process holds it, and to go through the server.
    let get = ["get", "--db", &db, "--tree", "t", "k"];
    let o = run(&get);
    assert_eq!(o.status.code(), Some(2), "{}", describe(&get, &o));
    let stderr = text(&o.stderr);
    assert!(stderr.contains(&format!("in use by process {} (writing: ", child.id())), "{stderr}");
    assert!(
        stderr.contains("It is a running `ferrite serve`: read and write through it"),
        "{stderr}"
    );
    // More connections than descriptors: the rest wait in the listen backlog.
    let mut held: Vec<_> = (0..100).map(|_| std::net::TcpStream::connect(addr).unwrap()).collect();
    let cpu_ticks = || {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap();
        let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    let before = cpu_ticks();
    std::thread::sleep(std::time::Duration::from_secs(1));
    let spent = cpu_ticks() - before;
    // (A spinning accept loop takes a whole core: about 100 ticks a second.)
    assert!(spent < 30, "{spent} ticks of CPU in a second while out of descriptors");
    held.clear();
    // Served again.
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    stream.write_all(b"stats\r\n").unwrap();
    let mut stats = String::new();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    while !stats.ends_with("END\r\n") {
        if reader.read_line(&mut stats).unwrap() == 0 {
            break;
        }
    }
    let paused = stats
        .lines()
        .find_map(|l| l.strip_prefix("STAT listen_disabled_num "))
        .expect(&stats)
        .parse::<u64>()
        .unwrap();
    assert!(paused > 0, "{stats}");
    drop((reader, stream));
    // SAFETY: signals a child this test started and has not reaped.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(rc, 0);
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert_eq!(rest, "stopped\n");
}

/// A bad `--authfile` is refused before the server opens anything.
#[test]
fn serve_refuses_a_bad_authfile() {
    let tmp = TempDir::new("serve-auth");
    let db = tmp.db();
    let missing = tmp.0.join("no-such-authfile");
    let out = run(&["serve", "--db", &db, "--authfile", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("reading the authfile"), "{}", text(&out.stderr));
    let bad = tmp.0.join("authfile");
    std::fs::write(&bad, "alice:secret\nbob\n").unwrap();
    let out = run(&["serve", "--db", &db, "--authfile", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("line 2 is not user:password"), "{}", text(&out.stderr));
    assert!(!std::path::Path::new(&db).exists(), "nothing opened");
}

/// A `--backup-dir` inside the data directory is refused before anything is made.
#[test]
fn serve_refuses_a_backup_dir_inside_the_data() {
    let tmp = TempDir::new("serve-backup-dir");
    let db = tmp.db();
    let inside = format!("{db}/backups");
    let out = run(&["serve", "--db", &db, "--backup-dir", &inside]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("inside the data directory"), "{}", text(&out.stderr));
    assert!(!std::path::Path::new(&db).exists(), "nothing made");
}

/// `ferrite serve` says where it listens, answers memcached's protocol there, stops cleanly
/// on SIGTERM (exit status 0, `stopped`), and finds its items again when started anew, even
/// after it was killed (SIGKILL) right after acknowledging them.
#[test]
fn serve_answers_memcached_and_stops_cleanly_on_sigterm() {
    use std::io::{BufRead, BufReader, Read, Write};
    let tmp = TempDir::new("serve");
    let db = tmp.db();
    let start = || {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ferrite"))
            .args(["serve", "--db", &db, "--listen", "127.0.0.1:0", "--workers", "2"])
            .args(["--memory-mib", "32"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("starting ferrite serve");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let addr = line.trim().strip_prefix("listening on ").unwrap_or_else(|| {
            let mut err = String::new();
            child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            panic!("first line {line:?}, stderr {err}")
        });
        (child, stdout, addr.parse::<std::net::SocketAddr>().unwrap())
    };
    // Reads until the reply is whole, or until the server stops sending (a shorter reply:
    // compared as it is).
    let talk = |addr, request: &[u8], reply: &[u8]| {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        stream.write_all(request).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while got.len() < reply.len() {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        assert_eq!(text(&got), text(reply));
    };
    let stop = |mut child: std::process::Child,
                mut stdout: BufReader<std::process::ChildStdout>| {
        // SAFETY: signals a child this test started and has not reaped.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        assert_eq!(rc, 0);
        let status = child.wait().unwrap();
        let mut rest = String::new();
        stdout.read_to_string(&mut rest).unwrap();
        assert_eq!((status.code(), rest.as_str()), (Some(0), "stopped\n"));
    };
    let (child, stdout, addr) = start();
    talk(
        addr,
        b"set greeting 7 0 5\r\nhello\r\nget greeting\r\n",
        b"STORED\r\nVALUE greeting 7 5\r\nhello\r\nEND\r\n",
    );
    stop(child, stdout);
    let (mut child, _stdout, addr) = start();
    talk(addr, b"get greeting\r\n", b"VALUE greeting 7 5\r\nhello\r\nEND\r\n");
    // Acknowledged SETs survive a crash (--durability sync, the default): 300 items on one
    // connection, all acknowledged, then SIGKILL.
    let value = |i: usize| format!("value {i} {}", "v".repeat(i * 31 % 9000));
    let mut sets = Vec::new();
    let mut replies = Vec::new();
    for i in 0..300 {
        let v = value(i);
        sets.extend_from_slice(format!("set item{i} {i} 0 {}\r\n{v}\r\n", v.len()).as_bytes());
        replies.extend_from_slice(b"STORED\r\n");
    }
    talk(addr, &sets, &replies);
    child.kill().unwrap();
    child.wait().unwrap();
    let (child, stdout, addr) = start();
    for i in [0usize, 1, 150, 299] {
        let v = value(i);
        let reply = format!("VALUE item{i} {i} {}\r\n{v}\r\nEND\r\n", v.len());
        talk(addr, format!("get item{i}\r\n").as_bytes(), reply.as_bytes());
    }
    stop(child, stdout);
    assert_eq!(run(&["check", "--db", &db]).status.code(), Some(0), "a clean directory");
}

/// Runs `ferrite args` from a thread whose seccomp filter refuses `syscalls` with `EPERM`,
/// as a container runtime's profile refuses io_uring: the process inherits the filter.
fn run_refusing(syscalls: &'static [libc::c_long], args: &[&str]) -> Output {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    std::thread::spawn(move || {
        ferrite::testing::refuse_syscalls_on_this_thread(syscalls);
        Command::new(env!("CARGO_BIN_EXE_ferrite")).args(&args).output().expect("running ferrite")
    })
    .join()
    .unwrap()
}

#[test]
fn where_io_uring_is_refused_the_benchmark_falls_back_and_serve_says_why_not() {
    let tmp = TempDir::new("no-io-uring");
    let bench = tmp.0.join("bench");
    let bench = bench.to_str().unwrap();
    let args =
        ["bench", "lookup", "--db", bench, "--keys", "3000", "--pool-mib", "1", "--seconds", "0.2"];
    let o = run_refusing(&[libc::SYS_io_uring_setup], &args);
    let what = describe(&args, &o);
    assert_eq!(o.status.code(), Some(0), "{what}");
    let stderr = text(&o.stderr);
    assert!(stderr.contains("io_uring refused") && stderr.contains("use aio instead"), "{what}");
    let out = text(&o.stdout);
    assert_eq!(field(&parse_result(out.lines().last().unwrap_or("")), "engine"), "aio", "{what}");

    // An engine named is used or the run fails, with the kernel's refusal.
    let named = [&args[..], &["--engine", "io_uring"]].concat();
    let o = run_refusing(&[libc::SYS_io_uring_setup], &named);
    let what = describe(&named, &o);
    assert_eq!(o.status.code(), Some(2), "{what}");
    assert!(text(&o.stderr).contains("io_uring is disabled here"), "{what}");

    // The server's connections live on the rings: it refuses to start, and says why.
    let db = tmp.db();
    let serve = ["serve", "--db", &db, "--listen", "127.0.0.1:0"];
    let o = run_refusing(&[libc::SYS_io_uring_setup], &serve);
    let what = describe(&serve, &o);
    assert_eq!(o.status.code(), Some(2), "{what}");
    assert!(text(&o.stderr).contains("the server needs io_uring"), "{what}");
}

/// A tree's name and its entries.
type TreeEntries = (String, Vec<(Vec<u8>, Vec<u8>)>);

/// Every entry of every tree of the data directory `dir`, read through the library.
fn all_entries(dir: &Path) -> Vec<TreeEntries> {
    let options = ferrite::Options { read_only: true, workers: 0, ..Default::default() };
    let db = ferrite::Db::open(dir, options).unwrap();
    let trees = db
        .tree_names()
        .unwrap()
        .into_iter()
        .map(|name| {
            let tree = db.open_tree(&name).unwrap();
            let entries = tree.iter().map(|e| e.unwrap()).collect();
            (name, entries)
        })
        .collect();
    db.close().unwrap();
    trees
}

#[test]
fn dump_and_load_round_trip_any_bytes_in_text_and_hex() {
    let tmp = TempDir::new("dump");
    let source = tmp.0.join("source");
    let options = ferrite::Options { workers: 0, pool_bytes: 8 << 20, ..Default::default() };
    let db = ferrite::Db::open(&source, options).unwrap();
    let bytes = db.tree("bytes").unwrap();
    // Every one-byte key, and keys that a line format could trip on.
    for b in 0..=255u8 {
        bytes.put([b], [b, b'\n', b'\t', b'\\', 0xff]).unwrap();
    }
    let awkward: [&[u8]; 8] = [
        b"#not a directive",
        b"# tree fake",
        b"# end trees=0 entries=0",
        b"tab\tin key",
        b"\\x41 looks escaped",
        b"\xff\xfe\xfd",
        "naïve ☃ \u{85}".as_bytes(),
        b"trailing cr\r",
    ];
    for (i, key) in awkward.iter().enumerate() {
        let mut key = key.to_vec();
        key.push(b'!'); // after every one-byte key
        bytes.put(&key, format!("value {i}\r\n").as_bytes()).unwrap();
    }
    bytes.put(b"empty value", b"").unwrap();
    // Values past a page, and an object.
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    bytes.put(b"big", &big[..10_000]).unwrap();
    bytes.put(b"object", &big).unwrap();
    db.tree("name\twith tab").unwrap().put(b"k", b"v").unwrap();
    db.tree("empty").unwrap();
    drop(bytes);
    db.close().unwrap();
    let expected = all_entries(&source);
    assert_eq!(expected.len(), 3);
    let source = source.to_str().unwrap();

    for hex in [false, true] {
        let mut args = vec!["dump", "--db", source];
        if hex {
            args.push("--hex");
        }
        let o = run(&args);
        assert_eq!(o.status.code(), Some(0), "{}", describe(&args, &o));
        let dump = o.stdout;
        let text = String::from_utf8_lossy(&dump);
        let header = if hex { "# ferrite dump 1 hex\n" } else { "# ferrite dump 1 text\n" };
        assert!(text.starts_with(header), "{text}");
        assert!(text.ends_with("# end trees=3 entries=268\n"), "{text}");
        assert!(
            text.contains("# tree name\\twith tab\n# tree empty\n")
                || text.contains("# tree empty\n")
        );
        if !hex {
            assert!(text.contains("\n\\x23not a directive!\tvalue 0\\r\\n\n"), "{text}");
        }
        let copy = tmp.0.join(if hex { "copy-hex" } else { "copy-text" });
        let copy_str = copy.to_str().unwrap();
        let load = ["load", "--db", copy_str];
        let o = run_with_stdin(&load, &dump);
        assert_eq!(o.status.code(), Some(0), "{}", describe(&load, &o));
        assert!(
            text_of(&o.stderr).contains("loaded 268 entries into 3 trees"),
            "{}",
            describe(&load, &o)
        );
        assert_eq!(all_entries(&copy), expected, "hex: {hex}");
        // The copy dumps to the same bytes.
        let again = run(&[&args[..1], &["--db", copy_str], &args[3..]].concat());
        assert_eq!(again.stdout, dump);
    }

    // One tree of a dump, and plain lines (scan's output) into a named tree.
    let dump = run(&["dump", "--db", source]).stdout;
    let one = tmp.0.join("one");
    let one_str = one.to_str().unwrap();
    let o = run_with_stdin(&["load", "--db", one_str, "--tree", "name\twith tab"], &dump);
    assert_eq!(o.status.code(), Some(0), "{}", text_of(&o.stderr));
    assert_eq!(all_entries(&one), vec![expected[2].clone()]);
    let scan = run(&["scan", "--db", source, "--tree", "bytes"]).stdout;
    let o = run_with_stdin(&["load", "--db", one_str, "--tree", "scanned"], &scan);
    assert_eq!(o.status.code(), Some(0), "{}", text_of(&o.stderr));
    let loaded = all_entries(&one);
    assert_eq!(loaded[1], ("scanned".to_owned(), expected[0].1.clone()));
}

fn text_of(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn load_refuses_what_is_not_a_whole_dump_and_says_how_far_it_got() {
    let tmp = TempDir::new("load-bad");
    let db = tmp.db();
    let cases: [(&[u8], &[&str], &str); 8] = [
        (b"k\tv\n", &[], "line 1: the input has no `# ferrite dump` header"),
        (b"# ferrite dump 2 text\n", &[], "line 1: a dump of version \"2\""),
        (b"# ferrite dump 1 base64\n", &[], "encoding \"base64\", not text or hex"),
        (b"# ferrite dump 1 text\nk\tv\n", &[], "line 2: an entry before the dump's first"),
        (
            b"# ferrite dump 1 text\n# tree t\na\t1\nb\t2\n",
            &[],
            "the dump ends after line 4 without its `# end` line: it was cut short; the \
             input's first 2 entries were loaded and are durable",
        ),
        (
            b"# ferrite dump 1 text\n# tree t\na\t1\n# end trees=1 entries=2\n",
            &[],
            "line 4: the dump says it holds `trees=1 entries=2`, but it held `trees=1 entries=1`",
        ),
        (
            b"a\t1\nb 2\n",
            &["--tree", "t"],
            "line 2: not KEY<TAB>VALUE: the line has no tab; the input's first entry was loaded",
        ),
        (b"a\t1\nb\t\\q\n", &["--tree", "t"], "line 2: the value: \"\\\\q\" is not an escape"),
    ];
    for (input, extra, expected) in cases {
        let args = [&["load", "--db", &db][..], extra].concat();
        let o = run_with_stdin(&args, input);
        let what = format!("{:?}\n{}", text_of(input), describe(&args, &o));
        assert_eq!(o.status.code(), Some(2), "{what}");
        assert!(text_of(&o.stderr).contains(expected), "{what}");
    }
    // What each refused load committed before its error is there (a, b; then a again).
    let o = run(&["scan", "--db", &db, "--tree", "t"]);
    assert_eq!(text_of(&o.stdout), "a\t1\nb\t2\n");
}

/// A load that fills the disk stops with the disk's error, says how many entries it loaded,
/// and leaves a directory that checks clean and holds exactly those. Root only (a tmpfs).
#[test]
fn load_on_a_full_disk_fails_cleanly_and_keeps_what_it_said() {
    let tmp = TempDir::new("load-full");
    // Room for the log's first segment and the first 64 MiB of pages, not their growth.
    let Some(mount) = Tmpfs::mount(&tmp.0.join("mnt"), "150m") else { return };
    let db = mount.path().join("db");
    let db_str = db.to_str().unwrap();
    let mut input = b"# ferrite dump 1 text\n# tree t\n".to_vec();
    let value = "v".repeat(1000);
    let entries = 100_000;
    for i in 0..entries {
        input.extend_from_slice(format!("key{i:08}\t{value}\n").as_bytes());
    }
    input.extend_from_slice(format!("# end trees=1 entries={entries}\n").as_bytes());
    let args = ["load", "--db", db_str, "--no-direct", "--pool-mib", "16"];
    let o = run_with_stdin(&args, &input);
    let what = describe(&args, &o);
    assert_eq!(o.status.code(), Some(2), "{what}");
    let stderr = text_of(&o.stderr);
    assert!(stderr.contains("No space left on device"), "{what}");
    let error = stderr.lines().find(|l| l.starts_with("ferrite: load: ")).unwrap_or("");
    let loaded: usize = error
        .split("; the input's first ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the error says how many entries are durable: {what}"));
    assert!(loaded > 0 && loaded < entries, "{what}");
    // Room again: the directory opens, checks clean, and holds exactly those entries.
    mount.resize("400m");
    let o = run(&["check", "--db", db_str, "--no-direct"]);
    assert_eq!(o.status.code(), Some(0), "{}", text_of(&o.stdout));
    let o = run(&["scan", "--db", db_str, "--no-direct", "--tree", "t"]);
    let lines: Vec<&str> = std::str::from_utf8(&o.stdout).unwrap().lines().collect();
    // At least the entries it called durable (batches committed after the last sync may be
    // there too), and only ever the input's first ones: batches commit in order.
    assert!(lines.len() >= loaded && lines.len() < entries, "{loaded}: {}", text_of(&o.stderr));
    assert!(lines.iter().enumerate().all(|(i, l)| *l == format!("key{i:08}\t{value}")));
}

/// A database of `keys` entries of 200 bytes in tree "t" (and an object in tree "o"), of
/// which every key not divisible by `keep_every` is deleted again.
fn thinned_db(dir: &Path, keys: u32, keep_every: u32) {
    let options = ferrite::Options { workers: 0, pool_bytes: 8 << 20, ..Default::default() };
    let db = ferrite::Db::open(dir, options).unwrap();
    let tree = db.tree("t").unwrap();
    let value = [b'v'; 200];
    for chunk in (0..keys).collect::<Vec<_>>().chunks(500) {
        let mut batch = ferrite::WriteBatch::new();
        for i in chunk {
            batch.put(&tree, format!("key{i:08}").as_bytes(), value);
        }
        db.write(&batch).unwrap();
    }
    for chunk in (0..keys).filter(|i| i % keep_every != 0).collect::<Vec<_>>().chunks(500) {
        let mut batch = ferrite::WriteBatch::new();
        for i in chunk {
            batch.delete(&tree, format!("key{i:08}").as_bytes());
        }
        db.write(&batch).unwrap();
    }
    let big: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
    db.tree("o").unwrap().put(b"object", &big).unwrap();
    drop(tree);
    db.close().unwrap();
}

#[test]
fn compact_rewrites_into_fewer_pages_and_keeps_every_entry() {
    let tmp = TempDir::new("compact");
    let dir = tmp.0.join("db");
    thinned_db(&dir, 40_000, 10);
    let before = all_entries(&dir);
    let (stats_before, bytes_before) =
        (stats_json(&dir), ferrite_bench::workloads::run::bytes_on_disk(&dir));
    let dir_str = dir.to_str().unwrap();
    let args = ["compact", "--db", dir_str, "--tree", "t"];
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&args, &o));
    assert!(
        text(&o.stdout).contains("4001 entries rewritten in key order"),
        "{}",
        describe(&args, &o)
    );
    assert_eq!(all_entries(&dir), before, "every entry, byte for byte");
    let (stats_after, bytes_after) =
        (stats_json(&dir), ferrite_bench::workloads::run::bytes_on_disk(&dir));
    let leaves = |stats: &serde_json::Value| {
        stats["trees"].as_array().unwrap().iter().find(|t| t["name"] == "t").unwrap()["leaf_pages"]
            .as_u64()
            .unwrap()
    };
    // 4,000 entries of ~215 bytes: about 18 a leaf when full, so about 220 leaves.
    assert!(leaves(&stats_before) > 2 * leaves(&stats_after), "{stats_before}\n{stats_after}");
    assert!(leaves(&stats_after) < 260, "{stats_after}");
    assert!(bytes_after * 2 < bytes_before, "{bytes_before} -> {bytes_after} bytes");
    assert_eq!(stats_after["pages"]["free"], 0, "{stats_after}");
    let o = run(&["check", "--db", dir_str]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stdout));
    // Nothing left beside it; a tree that is not there is refused before any work.
    let leftovers: Vec<_> = fs::read_dir(&tmp.0).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers, vec![std::ffi::OsString::from("db")]);
    let o = run(&["compact", "--db", dir_str, "--tree", "absent"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
}

fn stats_json(dir: &Path) -> serde_json::Value {
    let o = run(&["stats", "--db", dir.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn backup_copies_a_consistent_checked_state_even_of_a_crashed_directory() {
    let tmp = TempDir::new("backup");
    let dir = tmp.0.join("db");
    thinned_db(&dir, 3000, 3);
    let expected = all_entries(&dir);
    let target = tmp.0.join("copy");
    let (dir_str, target_str) = (dir.to_str().unwrap(), target.to_str().unwrap());
    let args = ["backup", "--db", dir_str, "--to", target_str];
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&args, &o));
    assert!(
        text(&o.stdout).contains("1001 entries, checked: no faults"),
        "{}",
        describe(&args, &o)
    );
    assert_eq!(all_entries(&target), expected);
    // Not over a directory that holds something.
    let o = run(&args);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("exists and is not empty"), "{}", text(&o.stderr));
    // A directory that was not closed cleanly: the copy holds its log, and recovers it.
    let image = crash_image(&tmp, 40);
    let crashed = tmp.0.join("crashed-copy");
    let args = ["backup", "--db", image.to_str().unwrap(), "--to", crashed.to_str().unwrap()];
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&args, &o));
    let entries = all_entries(&crashed);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].1.len(), 40, "every committed put of the crashed directory");
}

/// Backup and compaction on a full file system fail cleanly: the source unchanged, the
/// partial target removed. Root only (a tmpfs).
#[test]
fn backup_and_compact_on_a_full_disk_leave_the_source_and_remove_the_copy() {
    let tmp = TempDir::new("maint-full");
    let source = tmp.0.join("source");
    thinned_db(&source, 20_000, 1);
    let expected = all_entries(&source);
    // The backup's target on a file system too small for the copy.
    let Some(small) = Tmpfs::mount(&tmp.0.join("small"), "2m") else { return };
    let target = small.path().join("copy");
    let args = ["backup", "--db", source.to_str().unwrap(), "--to", target.to_str().unwrap()];
    let o = run(&args);
    let what = describe(&args, &o);
    assert_eq!(o.status.code(), Some(2), "{what}");
    let stderr = text(&o.stderr);
    assert!(stderr.contains("No space left on device"), "{what}");
    assert!(stderr.contains("the source is unchanged, and the partial"), "{what}");
    assert!(!target.exists(), "{what}");
    assert_eq!(all_entries(&source), expected);

    // A compaction on a file system with room for the source but not for its copy.
    let Some(fs_) = Tmpfs::mount(&tmp.0.join("fs"), "200m") else { return };
    let dir = fs_.path().join("db");
    copy_dir(&source, &dir);
    let used = ferrite_bench::workloads::run::bytes_on_disk(fs_.path());
    fs_.resize(&format!("{}k", used / 1024 + 512));
    let args = ["compact", "--db", dir.to_str().unwrap(), "--no-direct"];
    let o = run(&args);
    let what = describe(&args, &o);
    assert_eq!(o.status.code(), Some(2), "{what}");
    assert!(text(&o.stderr).contains("No space left on device"), "{what}");
    let left: Vec<_> = fs::read_dir(fs_.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("db")], "{what}");
    fs_.resize("400m");
    let o = run(&["check", "--db", dir.to_str().unwrap(), "--no-direct"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stdout));
}

/// Creates the data directory `dir` with `keys` entries `entry(i)` in tree "t" (the puts not
/// synced one by one, a 4 MiB pool), and closes it.
fn fill_tree_t(dir: &Path, keys: u32, entry: impl Fn(u32) -> (String, Vec<u8>)) {
    let options = ferrite::Options {
        workers: 0,
        pool_bytes: 4 << 20,
        durability: ferrite::Durability::None,
        ..Default::default()
    };
    let opened = ferrite::Db::open(dir, options).unwrap();
    let tree = opened.tree("t").unwrap();
    for i in 0..keys {
        let (key, value) = entry(i);
        tree.put(key, value).unwrap();
    }
    drop(tree);
    opened.close().unwrap();
}

/// Flips a byte in the middle of the first inner node of the page file of `dir`
/// (format/page.rs: the kind at byte 4, 3 for inner nodes; the page's own id at byte 8),
/// and returns its page id.
fn damage_first_inner_node(dir: &Path) -> usize {
    let pages = dir.join("pages.ferrite");
    let mut bytes = fs::read(&pages).unwrap();
    let inner = (3..bytes.len() / 4096)
        .find(|&id| {
            let page = &bytes[id * 4096..(id + 1) * 4096];
            page[4] == 3 && u64::from_le_bytes(page[8..16].try_into().unwrap()) == id as u64
        })
        .expect("an inner node");
    bytes[inner * 4096 + 2048] ^= 0x5a;
    fs::write(&pages, &bytes).unwrap();
    inner
}

/// `ferrite stats --server ADDR` shows a running server's counters, its second tier's use
/// among them (the served directory is locked, and the tier's counters live in the server's
/// process); a directory the server holds says how to reach them; an address with no server
/// is an error that names it.
#[test]
fn stats_asks_a_running_server_for_its_tier_use() {
    use std::io::{BufRead, BufReader, Read, Write};
    let tmp = TempDir::new("stats-server");
    let db = tmp.db();
    let tier = tmp.0.join("tier");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args(["serve", "--db", &db, "--listen", "127.0.0.1:0", "--workers", "1"])
        .args(["--memory-mib", "16", "--tier", tier.to_str().unwrap()])
        .args(["--tier-mib", "64", "--tier-admission", "all"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starting ferrite serve");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let Some(addr) = line.trim().strip_prefix("listening on ").map(str::to_owned) else {
        let mut err = String::new();
        child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        panic!("first line {line:?}, stderr {err}")
    };
    // Items far beyond the pool, read back twice: pages are evicted into the tier and read
    // from it.
    let mut stream = std::net::TcpStream::connect(&addr).unwrap();
    stream.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let value = "v".repeat(3000);
    let items = 12_000;
    let mut expect = |request: String, count: usize| {
        stream.write_all(request.as_bytes()).unwrap();
        let mut reply = String::new();
        for _ in 0..count {
            reader.read_line(&mut reply).unwrap();
        }
        reply
    };
    let mut sets = String::new();
    for i in 0..items {
        sets.push_str(&format!("set item{i} 0 0 {}\r\n{value}\r\n", value.len()));
    }
    let reply = expect(sets, items);
    assert_eq!(reply.matches("STORED").count(), items);
    for _ in 0..2 {
        for chunk in (0..items).collect::<Vec<_>>().chunks(500) {
            let gets: String = chunk.iter().map(|i| format!("get item{i}\r\n")).collect();
            let reply = expect(gets, chunk.len() * 3);
            assert_eq!(reply.matches("VALUE").count(), chunk.len());
        }
    }
    let o = run(&["stats", "--server", &addr]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains(&format!("server      {addr}: version")), "{out}");
    assert!(out.contains("gets        24,000 (24,000 hits, 0 misses"), "{out}");
    let tier_use =
        out.lines().find(|l| l.starts_with("tier use")).unwrap_or_else(|| panic!("{out}"));
    assert!(tier_use.contains("hits of") && tier_use.contains("OBP"), "{out}");
    let o = run(&["stats", "--server", &addr, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["server"], addr.as_str());
    assert_eq!(json["cmd_get"], 2 * items as u64);
    let (lookups, hits) =
        (json["tier_lookups"].as_u64().unwrap(), json["tier_hits"].as_u64().unwrap());
    assert!(lookups > 0 && hits > 0 && hits <= lookups, "{json}");
    assert!(json["tier_inserts"].as_u64().unwrap() > 0, "{json}");
    assert!(json["tier_obp"].as_f64().is_some(), "{json}");
    // The directory itself is the server's: the refusal says how to see its counters.
    let o = run(&["stats", "--db", &db, "--quick"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(text(&o.stderr).contains("ferrite stats --server ADDR"), "{}", text(&o.stderr));
    #[allow(unsafe_code)]
    // SAFETY: signals a child this test started and has not reaped.
    let rc = unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(rc, 0);
    assert_eq!(child.wait().unwrap().code(), Some(0));
    // Nobody listens there now.
    let o = run(&["stats", "--server", &addr]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stdout));
    let err = text(&o.stderr);
    assert!(err.contains(&format!("asking the server at {addr} for its stats")), "{err}");
}
