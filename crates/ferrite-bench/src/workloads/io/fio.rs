//! The same measurement by fio, in the same run, when `fio` is on `PATH`: the command line
//! that asks fio for what `bench io` just did, and the reading of fio's JSON report.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use ferrite::io::EngineKind;
use serde::Deserialize;

use super::Pattern;

/// fio's name for the engine.
pub fn ioengine(kind: EngineKind) -> &'static str {
    match kind {
        EngineKind::IoUring => "io_uring",
        EngineKind::Aio => "libaio",
        EngineKind::Psync => "psync",
        EngineKind::Mmap => "mmap",
    }
}

/// fio's name for the pattern (`--rw`).
pub fn rw(pattern: Pattern) -> &'static str {
    match pattern {
        Pattern::RandRead => "randread",
        Pattern::SeqRead => "read",
        Pattern::RandWrite => "randwrite",
        Pattern::SeqWrite => "write",
    }
}

/// What fio is asked to do: the parameters of one engine's run.
#[derive(Debug, Clone, PartialEq)]
pub struct FioJob {
    pub file: PathBuf,
    pub engine: EngineKind,
    pub pattern: Pattern,
    pub bs: usize,
    /// Requests in flight per job (1 for the synchronous engines, as fio caps them).
    pub depth: usize,
    pub threads: usize,
    /// Bytes of the file the I/O covers, from offset 0.
    pub size_bytes: u64,
    pub direct: bool,
    pub ramp_ms: u64,
    pub runtime_ms: u64,
}

impl FioJob {
    /// The arguments of the fio command (without the program name). Jobs are threads (as
    /// ours are), reported as one group; random offsets are drawn with repeats (as ours are:
    /// no random map); a read pattern opens the file read-only.
    pub fn args(&self) -> Vec<String> {
        let mut args = vec![
            "--name=ferrite-bench-io".to_owned(),
            format!("--filename={}", self.file.display()),
            format!("--ioengine={}", ioengine(self.engine)),
            format!("--direct={}", u8::from(self.direct)),
            format!("--rw={}", rw(self.pattern)),
            format!("--bs={}", self.bs),
            format!("--iodepth={}", self.depth),
            format!("--numjobs={}", self.threads),
            format!("--size={}", self.size_bytes),
            "--thread".to_owned(),
            "--group_reporting".to_owned(),
            "--norandommap".to_owned(),
            "--lat_percentiles=1".to_owned(),
            "--time_based".to_owned(),
            format!("--ramp_time={}ms", self.ramp_ms),
            format!("--runtime={}ms", self.runtime_ms),
            "--output-format=json".to_owned(),
        ];
        if !self.pattern.is_write() {
            args.push("--readonly".to_owned());
        }
        args
    }
}

/// What fio measured.
#[derive(Debug, Clone, PartialEq)]
pub struct FioResult {
    /// Reads and writes per second, all jobs together.
    pub iops: f64,
    /// Bytes per second, all jobs together.
    pub bytes_per_s: f64,
    /// Latency percentiles in microseconds (total latency where fio reports it, else
    /// completion latency), of the direction that moved the most I/Os.
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
}

/// `fio` on `PATH`, if there is one.
pub fn find() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join("fio")).find(|candidate| {
        candidate.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// Runs `job` with the fio at `fio` and reads its report.
pub fn run(fio: &Path, job: &FioJob) -> Result<FioResult, String> {
    let output = Command::new(fio)
        .args(job.args())
        .output()
        .map_err(|e| format!("running {}: {e}", fio.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(format!("fio exited with {}: {last}", output.status));
    }
    parse(&stdout)
}

/// The part of fio's JSON report read here (fio writes many more fields, which are skipped).
#[derive(Debug, Deserialize)]
struct Report {
    #[serde(default)]
    jobs: Vec<Job>,
}

/// One job (all of them as one with `--group_reporting`).
#[derive(Debug, Deserialize)]
struct Job {
    /// fio's error number; 0 when the job ran.
    #[serde(default)]
    error: i64,
    read: Option<Direction>,
    write: Option<Direction>,
}

/// The reads or the writes of a job.
#[derive(Debug, Deserialize)]
struct Direction {
    #[serde(default)]
    iops: f64,
    #[serde(default)]
    bw_bytes: f64,
    /// Total latency (submission + completion), where fio measures it.
    lat_ns: Option<Latency>,
    /// Completion latency.
    clat_ns: Option<Latency>,
}

/// Latency percentiles, nanoseconds, by fio's name for them (`"99.000000"`).
#[derive(Debug, Deserialize)]
struct Latency {
    #[serde(default)]
    percentile: BTreeMap<String, f64>,
}

/// Reads fio's JSON report (anything fio printed before the JSON is skipped).
pub fn parse(text: &str) -> Result<FioResult, String> {
    let start = text.find('{').ok_or("fio printed no JSON report")?;
    let report: Report = serde_json::from_str(&text[start..])
        .map_err(|e| format!("fio's report is not JSON of the expected shape: {e}"))?;
    if report.jobs.is_empty() {
        return Err("fio's report has no jobs".to_owned());
    }
    let mut iops = 0.0;
    let mut bytes_per_s = 0.0;
    let mut busiest: Option<&Direction> = None;
    for job in &report.jobs {
        if job.error != 0 {
            return Err(format!("fio's job failed with error {}", job.error));
        }
        for stats in [&job.read, &job.write].into_iter().flatten() {
            iops += stats.iops;
            bytes_per_s += stats.bw_bytes;
            if busiest.is_none_or(|most| stats.iops > most.iops) {
                busiest = Some(stats);
            }
        }
    }
    let percentile = |key: &str| -> Option<f64> {
        let stats = busiest?;
        [&stats.lat_ns, &stats.clat_ns]
            .into_iter()
            .flatten()
            .find_map(|latency| latency.percentile.get(key).copied())
            .map(|ns| ns / 1e3)
    };
    Ok(FioResult {
        iops,
        bytes_per_s,
        p50_us: percentile("50.000000"),
        p99_us: percentile("99.000000"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of fio 3.x's report for a grouped random-read job (trimmed: fio prints
    /// many more fields, which the reader ignores), with a notice before the JSON as some
    /// versions print.
    const SAMPLE: &str = r#"note: both iodepth >= 1 and synchronous I/O engine are selected, queue depth will be capped at 1
{
  "fio version" : "fio-3.33",
  "timestamp" : 1732175000,
  "timestamp_ms" : 1732175000123,
  "time" : "Thu Nov 21 07:43:20 2024",
  "global options" : {
    "ramp_time" : "1000ms"
  },
  "jobs" : [
    {
      "jobname" : "ferrite-bench-io",
      "groupid" : 0,
      "error" : 0,
      "eta" : 0,
      "elapsed" : 7,
      "job options" : {
        "name" : "ferrite-bench-io",
        "filename" : "./ferrite-data/bench-io.dat",
        "ioengine" : "io_uring",
        "rw" : "randread",
        "bs" : "4096",
        "iodepth" : "64"
      },
      "read" : {
        "io_bytes" : 2097152000,
        "io_kbytes" : 2048000,
        "bw_bytes" : 419430400,
        "bw" : 409600,
        "iops" : 102400.123456,
        "runtime" : 5000,
        "total_ios" : 512000,
        "short_ios" : 0,
        "drop_ios" : 0,
        "slat_ns" : {
          "min" : 1042,
          "max" : 61234,
          "mean" : 2051.734,
          "stddev" : 612.5,
          "N" : 512000
        },
        "clat_ns" : {
          "min" : 101234,
          "max" : 5012345,
          "mean" : 600123.45,
          "stddev" : 200456.7,
          "N" : 512000,
          "percentile" : {
            "1.000000" : 301056,
            "50.000000" : 577536,
            "99.000000" : 1204224,
            "99.900000" : 2113536
          }
        },
        "lat_ns" : {
          "min" : 103456,
          "max" : 5014567,
          "mean" : 602175.18,
          "stddev" : 200500.1,
          "N" : 512000,
          "percentile" : {
            "1.000000" : 305152,
            "50.000000" : 581632,
            "99.000000" : 1220608,
            "99.900000" : 2146304
          }
        },
        "bw_min" : 398000,
        "bw_max" : 420000,
        "bw_agg" : 100.000000,
        "bw_mean" : 409600.0,
        "bw_dev" : 5000.1,
        "bw_samples" : 10,
        "iops_min" : 99500,
        "iops_max" : 105000,
        "iops_mean" : 102400.0,
        "iops_stddev" : 1250.5,
        "iops_samples" : 10
      },
      "write" : {
        "io_bytes" : 0,
        "io_kbytes" : 0,
        "bw_bytes" : 0,
        "bw" : 0,
        "iops" : 0.000000,
        "runtime" : 0,
        "total_ios" : 0,
        "short_ios" : 0,
        "drop_ios" : 0,
        "slat_ns" : { "min" : 0, "max" : 0, "mean" : 0.0, "stddev" : 0.0, "N" : 0 },
        "clat_ns" : { "min" : 0, "max" : 0, "mean" : 0.0, "stddev" : 0.0, "N" : 0 },
        "lat_ns" : { "min" : 0, "max" : 0, "mean" : 0.0, "stddev" : 0.0, "N" : 0 }
      },
      "job_runtime" : 4999,
      "usr_cpu" : 9.84,
      "sys_cpu" : 41.27,
      "ctx" : 135082,
      "majf" : 0,
      "minf" : 77,
      "iodepth_level" : {
        "1" : 0.1,
        "2" : 0.1,
        "4" : 0.1,
        "8" : 0.1,
        "16" : 0.1,
        "32" : 0.1,
        ">=64" : 99.9
      },
      "latency_depth" : 64,
      "latency_target" : 0,
      "latency_percentile" : 100.000000,
      "latency_window" : 0
    }
  ],
  "disk_util" : [
    {
      "name" : "vda",
      "read_ios" : 612000,
      "write_ios" : 12,
      "util" : 99.51
    }
  ]
}
"#;

    #[test]
    fn reads_iops_bandwidth_and_total_latency() {
        let result = parse(SAMPLE).unwrap();
        assert!((result.iops - 102_400.123_456).abs() < 1e-6);
        assert_eq!(result.bytes_per_s, 419_430_400.0);
        assert_eq!(result.p50_us, Some(581.632));
        assert_eq!(result.p99_us, Some(1_220.608));
    }

    #[test]
    fn sums_jobs_and_falls_back_to_completion_latency() {
        let job = |iops: f64| {
            format!(
                r#"{{"error": 0, "write": {{"iops": {iops}, "bw_bytes": 4096,
                   "clat_ns": {{"percentile": {{"50.000000": 2000, "99.000000": 9000}}}}}},
                   "read": {{"iops": 0.0, "bw_bytes": 0}}}}"#
            )
        };
        let text = format!(r#"{{"jobs": [{}, {}]}}"#, job(10.0), job(20.0));
        let result = parse(&text).unwrap();
        assert_eq!((result.iops, result.bytes_per_s), (30.0, 8192.0));
        assert_eq!((result.p50_us, result.p99_us), (Some(2.0), Some(9.0)));
    }

    #[test]
    fn failures_are_reported() {
        assert_eq!(parse("fio: no such file").unwrap_err(), "fio printed no JSON report");
        assert!(parse("{\"jobs\": []}").unwrap_err().contains("no jobs"));
        assert!(parse("{\"jobs\": [{\"error\": 5}]}").unwrap_err().contains("error 5"));
        assert!(parse("{\"jobs\": [").unwrap_err().contains("not JSON"));
    }

    #[test]
    fn the_command_line_says_the_same_as_our_run() {
        let job = FioJob {
            file: PathBuf::from("/data/bench-io.dat"),
            engine: EngineKind::Aio,
            pattern: Pattern::RandRead,
            bs: 4096,
            depth: 64,
            threads: 2,
            size_bytes: 1 << 30,
            direct: true,
            ramp_ms: 1000,
            runtime_ms: 5000,
        };
        let args = job.args();
        for expected in [
            "--filename=/data/bench-io.dat",
            "--ioengine=libaio",
            "--direct=1",
            "--rw=randread",
            "--bs=4096",
            "--iodepth=64",
            "--numjobs=2",
            "--size=1073741824",
            "--time_based",
            "--ramp_time=1000ms",
            "--runtime=5000ms",
            "--output-format=json",
            "--readonly",
        ] {
            assert!(args.iter().any(|a| a == expected), "{expected} missing from {args:?}");
        }
        let write = FioJob {
            engine: EngineKind::IoUring,
            pattern: Pattern::SeqWrite,
            direct: false,
            ..job
        }
        .args();
        for expected in ["--ioengine=io_uring", "--rw=write", "--direct=0"] {
            assert!(write.iter().any(|a| a == expected), "{expected} missing from {write:?}");
        }
        assert!(!write.iter().any(|a| a == "--readonly"));
        assert_eq!(ioengine(EngineKind::Psync), "psync");
        assert_eq!(ioengine(EngineKind::Mmap), "mmap");
        assert_eq!(rw(Pattern::SeqRead), "read");
        assert_eq!(rw(Pattern::RandWrite), "randwrite");
    }
}
