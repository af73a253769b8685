//! TPC-C's consistency after crashes, through the command line, as a user would check it:
//! `ferrite bench tpcc --keep` is stopped in the middle of its run, and `ferrite bench tpcc
//! --check` (which opens the kept database, recovering it) must find every consistency
//! condition holding: a transaction is in the database whole or not at all.
//!
//! - **Killed processes**: the run is killed (SIGKILL) at a different moment each round,
//!   with commits synced on some rounds and not on others; each round goes on from what the
//!   last one left.
//! - **Power cuts**: the data directory is on a small loop-mounted ext4 image, shut down
//!   without flushing its journal (`EXT4_IOC_SHUTDOWN`, as the engine's power-cut suite
//!   does: `crates/ferrite/tests/powercut.rs`), then mounted again. Needs root, loop devices
//!   and `mkfs.ext4`; skipped without them unless `FERRITE_REQUIRE_POWERCUT=1`.

#[path = "../../ferrite/tests/common/ext4.rs"]
#[allow(dead_code)]
mod ext4;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use ext4::{clean_up_after_killed_runs, missing_prerequisite, Image};
use tempfile::TempDir;

/// How long a run may take to load and start its terminals (a debug build, a busy CI).
const START_PATIENCE: Duration = Duration::from_secs(180);

/// `ferrite bench tpcc` on `db` at the reduced scale: a run far longer than the test waits.
fn start_run(db: &Path, sync: bool, direct: bool) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ferrite"));
    command.args(["bench", "tpcc", "--db"]).arg(db).args([
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
        "600",
        "--keep",
    ]);
    if sync {
        command.arg("--sync");
    }
    if !direct {
        command.arg("--no-direct");
    }
    command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("starting ferrite")
}

/// Waits until `child` says its terminals run (they run through the warm-up too); panics
/// with what it printed if it ends or takes too long.
fn wait_until_running(child: &mut Child) {
    let stderr = child.stderr.take().expect("stderr is piped");
    let (sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    loop {
        match lines.recv_timeout(START_PATIENCE) {
            Ok(line) if line.starts_with("running tpcc") => return,
            Ok(line) => seen.push(line),
            Err(e) => {
                let _ = child.kill();
                panic!(
                    "the run never started its terminals ({e:?}); it printed:\n{}",
                    seen.join("\n")
                )
            }
        }
    }
}

/// `ferrite bench tpcc --check` of `db`: asserts every condition holds; returns its output.
fn assert_consistent(db: &Path, direct: bool, round: u32) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ferrite"));
    command.args(["bench", "tpcc", "--db"]).arg(db).args([
        "--reduced-scale",
        "--warehouses",
        "2",
        "--check",
    ]);
    if !direct {
        command.arg("--no-direct");
    }
    let o: Output = command.output().expect("running ferrite");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "round {round}: --check failed:\n{out}\n{err}");
    let last = out.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(
            "result store=ferrite workload=tpcc-check warehouses=2 consistency=ok violations=0"
        ),
        "round {round}:\n{out}"
    );
    out
}

/// The log records the check's open replayed, from its summary ("recovered: N log records
/// replayed"); 0 if the database had been closed cleanly.
fn replayed(out: &str) -> u64 {
    out.split("recovered: ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .map_or(0, |n| n.parse().expect("a count of records"))
}

/// Kills the run at a different moment each round (the warm-up's terminals commit from its
/// start), synced and not, and checks the database each time.
#[test]
fn tpcc_stays_consistent_after_its_process_is_killed() {
    let dir = TempDir::with_prefix("ferrite-tpcc-kill-").unwrap();
    let db = dir.path().join("db");
    // Nothing kept yet: the check refuses and says what it needs.
    let o = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args(["bench", "tpcc", "--db"])
        .arg(&db)
        .args(["--reduced-scale", "--warehouses", "2", "--check"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("holds no finished TPC-C load of 2 warehouses"), "{err}");
    let mut recovered = 0;
    for round in 0..4u32 {
        let mut child = start_run(&db, round % 2 == 1, false);
        wait_until_running(&mut child);
        std::thread::sleep(Duration::from_millis(200 + 350 * u64::from(round)));
        child.kill().expect("killing the run");
        child.wait().expect("reaping the run");
        let out = assert_consistent(&db, false, round);
        recovered += u32::from(replayed(&out) > 0);
    }
    assert!(recovered >= 3, "the kills left no commits to replay: they tested nothing");
}

/// Cuts the power under the run: the file system loses what it had not written, the run
/// is killed, the image mounted again, and the database checked.
#[test]
fn tpcc_stays_consistent_after_power_cuts() {
    const LABEL: &str = "tpcc-powercut";
    if let Some(why) = missing_prerequisite() {
        if std::env::var_os("FERRITE_REQUIRE_POWERCUT").is_some_and(|v| v == "1") {
            panic!("FERRITE_REQUIRE_POWERCUT=1 but the power cuts cannot run: {why}");
        }
        eprintln!("skipped: {why}");
        return;
    }
    clean_up_after_killed_runs(LABEL);
    let image = Image::new(LABEL);
    image.format().and_then(|()| image.mount()).expect("making and mounting an ext4 image");
    let db: PathBuf = image.mount_point().join("db");
    let mut recovered = 0;
    for round in 0..3u32 {
        let mut child = start_run(&db, round != 1, true);
        wait_until_running(&mut child);
        std::thread::sleep(Duration::from_millis(300 + 400 * u64::from(round)));
        image.cut().expect("shutting the file system down");
        let _ = child.kill();
        child.wait().expect("reaping the run");
        image.unmount().and_then(|()| image.mount()).expect("mounting the image again");
        recovered += u32::from(replayed(&assert_consistent(&db, true, round)) > 0);
    }
    assert!(recovered >= 2, "the cuts left no commits to replay: they tested nothing");
}
