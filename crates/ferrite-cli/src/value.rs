//! The project's units as clap value parsers: counts with k / M / G suffixes (`--keys 4.6M`),
//! byte sizes (`--bs 64KiB`, `--offset 1m`), seconds (`--seconds 0.5`), lists of them, seeds,
//! the names of engines, stores, patterns and distributions (parsed by the crates that own
//! them), and files where `-` means standard input or output.
//!
//! Each parser is a function from the argument's text to the value or to a message; clap
//! puts the message after "invalid value 'TEXT' for '--option <VALUE>': ".

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use ferrite::io::EngineKind;
use ferrite_bench::stores::StoreKind;
use ferrite_bench::workloads::io::Pattern;
use ferrite_bench::workloads::recovery;
use ferrite_bench::workloads::ycsb::Distribution;

/// Largest pool or cache accepted, in MiB (16 TiB).
pub const MAX_POOL_MIB: u64 = 1 << 24;

/// Most committers of `fill --sync` and `bench recovery` (each may be a thread).
pub const MAX_COMMITTERS: u64 = 4096;

/// Most rounds of `bench compare`.
pub const MAX_ROUNDS: u64 = 100;

/// A whole number: digits with optional `_` separators, and with `suffixes` a k / M / G
/// multiplier (10^3, 10^6, 10^9) after a number that may have decimals (`3.2M`).
pub fn parse_whole(text: &str, suffixes: bool) -> Option<u64> {
    let (number, multiplier) = match text.as_bytes().last() {
        Some(b'k' | b'K') if suffixes => (&text[..text.len() - 1], 1_000u128),
        Some(b'm' | b'M') if suffixes => (&text[..text.len() - 1], 1_000_000),
        Some(b'g' | b'G') if suffixes => (&text[..text.len() - 1], 1_000_000_000),
        _ => (text, 1),
    };
    let (whole, fraction) = match number.split_once('.') {
        Some((whole, fraction)) if multiplier > 1 => (whole, fraction),
        Some(_) => return None,
        None => (number, ""),
    };
    let digits = |s: &str| -> Option<u128> {
        if s.is_empty() || s.starts_with('_') || s.ends_with('_') {
            return None;
        }
        s.chars()
            .filter(|&c| c != '_')
            .try_fold(0u128, |n, c| n.checked_mul(10)?.checked_add(u128::from(c.to_digit(10)?)))
    };
    let mut n = digits(whole)?.checked_mul(multiplier)?;
    if !fraction.is_empty() {
        let scale = 10u128.checked_pow(u32::try_from(fraction.len()).ok()?)?;
        let part = digits(fraction)?.checked_mul(multiplier)?;
        if part % scale != 0 {
            return None;
        }
        n = n.checked_add(part / scale)?;
    }
    u64::try_from(n).ok()
}

/// A byte count: digits, optionally followed by a binary unit (`k`/`KiB` = 1024, `m`/`MiB`
/// = 1024^2, `g`/`GiB` = 1024^3), as fio reads its block sizes.
pub fn parse_bytes(text: &str) -> Option<u64> {
    let split = text.find(|c: char| !c.is_ascii_digit() && c != '_').unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let multiplier: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        _ => return None,
    };
    parse_whole(digits, false)?.checked_mul(multiplier)
}

fn in_range(n: u64, min: u64, max: u64) -> Result<u64, String> {
    if n < min || n > max {
        return Err(format!("{n} is out of range ({min} to {max})"));
    }
    Ok(n)
}

/// A whole number in `min..=max`, digits only (`_` allowed between them).
pub fn whole(text: &str, min: u64, max: u64) -> Result<u64, String> {
    let n = parse_whole(text, false).ok_or_else(|| format!("{text:?} is not a whole number"))?;
    in_range(n, min, max)
}

/// As [`whole`], as a `usize`.
pub fn whole_usize(text: &str, min: usize, max: usize) -> Result<usize, String> {
    Ok(whole(text, min as u64, max as u64)? as usize)
}

/// A count of keys or records in `min..=max`: `20000`, `20k`, `3.2M`.
pub fn count(text: &str, min: u64, max: u64) -> Result<u64, String> {
    let n = parse_whole(text, true)
        .ok_or_else(|| format!("{text:?} is not a whole number (like 20000, 20k, 3.2M)"))?;
    in_range(n, min, max)
}

/// Operations per second of an open loop: a positive count (`50k`).
pub fn rate(text: &str) -> Result<f64, String> {
    match parse_whole(text, true) {
        Some(n) if n > 0 => Ok(n as f64),
        _ => Err(format!("{text:?} is not a positive whole number of operations per second")),
    }
}

/// Seconds: a positive number, fractions allowed.
/// `ADDR:PORT` (an IPv6 address in brackets: `[::1]:11211`).
pub fn socket_addr(text: &str) -> Result<std::net::SocketAddr, String> {
    text.parse().map_err(|_| {
        format!("{text:?} is not an address and port (for example 127.0.0.1:11211 or [::1]:11211)")
    })
}

/// The zipfian constant: a number strictly between 0 and 1 (`0.99`, YCSB's).
pub fn theta(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(t) if t > 0.0 && t < 1.0 => Ok(t),
        _ => Err(format!(
            "{text:?} is not a zipfian constant (a number between 0 and 1, such as 0.99)"
        )),
    }
}

pub fn seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s <= 1e6 => Ok(s),
        _ => Err(format!("{text:?} is not a positive number of seconds")),
    }
}

/// `--seconds 10,30,60` of `bench recovery`: run lengths, fractions allowed, at least 1 ms
/// each, at most [`recovery::MAX_RUNS`].
pub fn seconds_list(list: &str) -> Result<Vec<f64>, String> {
    let lengths = list
        .split(',')
        .map(|item| match seconds(item)? {
            s if s < 1e-3 => Err(format!("{item:?} is shorter than 1 ms")),
            s => Ok(s),
        })
        .collect::<Result<Vec<f64>, String>>()?;
    if lengths.len() > recovery::MAX_RUNS {
        return Err(format!(
            "{} run lengths, at most {} allowed",
            lengths.len(),
            recovery::MAX_RUNS
        ));
    }
    Ok(lengths)
}

/// `on` or `off`.
pub fn on_off(text: &str) -> Result<bool, String> {
    match text {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("{text:?} is not on or off")),
    }
}

/// A seed: decimal, or hexadecimal after `0x`.
pub fn parse_seed(text: &str) -> Option<u64> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(&hex.replace('_', ""), 16).ok(),
        None => parse_whole(text, false),
    }
}

pub fn seed(text: &str) -> Result<u64, String> {
    parse_seed(text).ok_or_else(|| format!("{text:?} is not a 64-bit number"))
}

/// `--bs` of `bench io`: a byte size, a multiple of 4096, at most `max`.
pub fn block_size(text: &str, max: usize) -> Result<usize, String> {
    let bs = parse_bytes(text)
        .ok_or_else(|| format!("{text:?} is not a size in bytes (like 4096, 4k, 64KiB, 1m)"))?;
    if bs % 4096 != 0 {
        return Err(format!("{bs} is not a multiple of 4096"));
    }
    Ok(in_range(bs, 4096, max as u64)? as usize)
}

/// `--offset` and `--length` of the object commands: a byte count (`4096`, `4k`, `1m`: binary
/// units, 1k = 1024) up to the largest object.
pub fn object_bytes(text: &str) -> Result<u64, String> {
    let n = parse_bytes(text)
        .ok_or_else(|| format!("{text:?} is not a number of bytes (like 4096, 4k, 64KiB, 1m)"))?;
    in_range(n, 0, ferrite::MAX_OBJECT_LEN)
}

/// `--value-file` and `--output`: a file, or `-` for standard input or output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileArg {
    /// `-`: standard input (`--value-file`) or standard output (`--output`).
    Std,
    Path(PathBuf),
}

pub fn file_arg(text: OsString) -> Result<FileArg, String> {
    if text == "-" {
        return Ok(FileArg::Std);
    }
    path(text).map(FileArg::Path)
}

/// A path that is not empty.
pub fn path(text: OsString) -> Result<PathBuf, String> {
    if text.is_empty() {
        return Err("must not be empty".into());
    }
    Ok(PathBuf::from(text))
}

/// `--devices a,b,c`: the paths in order; none may be empty.
pub fn paths(list: OsString) -> Result<Vec<PathBuf>, String> {
    let paths: Vec<PathBuf> = list
        .as_bytes()
        .split(|&b| b == b',')
        .map(|part| PathBuf::from(OsStr::from_bytes(part)))
        .collect();
    if paths.iter().any(|p| p.as_os_str().is_empty()) {
        return Err(format!("{list:?} has an empty path"));
    }
    Ok(paths)
}

pub fn store(text: &str) -> Result<StoreKind, String> {
    StoreKind::from_name(text)
        .ok_or_else(|| format!("unknown store {text:?} (ferrite, rocksdb, wiredtiger, lmdb)"))
}

pub fn engine(text: &str) -> Result<EngineKind, String> {
    EngineKind::from_name(text)
        .ok_or_else(|| format!("unknown engine {text:?} (io_uring, aio, psync, mmap)"))
}

/// `--engine` of `bench io`: one engine, or `all` of them (io_uring first).
pub fn engines(text: &str) -> Result<Vec<EngineKind>, String> {
    match text {
        "all" => Ok(EngineKind::ALL.to_vec()),
        name => EngineKind::from_name(name)
            .map(|kind| vec![kind])
            .ok_or_else(|| format!("unknown engine {name:?} (io_uring, aio, psync, mmap or all)")),
    }
}

pub fn pattern(text: &str) -> Result<Pattern, String> {
    Pattern::from_name(text)
        .ok_or_else(|| format!("unknown pattern {text:?} (randread, seqread, randwrite, seqwrite)"))
}

pub fn distribution(text: &str) -> Result<Distribution, String> {
    Distribution::from_name(text).ok_or_else(|| format!("{text:?} is not uniform or zipfian"))
}

/// The key order of `fill`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Sequential,
    Random,
}

pub fn order(text: &str) -> Result<Order, String> {
    match text {
        "seq" | "sequential" => Ok(Order::Sequential),
        "random" => Ok(Order::Random),
        other => Err(format!("{other:?} is not seq or random")),
    }
}

pub fn suite(text: &str) -> Result<String, String> {
    match ferrite_bench::workloads::compare::suite(text) {
        Some(_) => Ok(text.to_owned()),
        // (The memcached server's sweep: `compare_serve.rs`; TPC-C: `compare_tpcc.rs`.)
        None if text == "serve" || text == "tpcc" => Ok(text.to_owned()),
        None => Err(format!(
            "unknown suite {text:?} (known: {}, serve, tpcc)",
            ferrite_bench::workloads::compare::SUITES.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_numbers() {
        assert_eq!(parse_whole("20000", false), Some(20_000));
        assert_eq!(parse_whole("3_200_000", false), Some(3_200_000));
        assert_eq!(parse_whole("20k", true), Some(20_000));
        assert_eq!(parse_whole("20k", false), None);
        assert_eq!(parse_whole("3.2M", true), Some(3_200_000));
        assert_eq!(parse_whole("4.6M", true), Some(4_600_000));
        assert_eq!(parse_whole("1.5k", true), Some(1_500));
        assert_eq!(parse_whole("1G", true), Some(1_000_000_000));
        assert_eq!(parse_whole("1.0005k", true), None);
        assert_eq!(parse_whole("1.5", true), None);
        assert_eq!(parse_whole("", true), None);
        assert_eq!(parse_whole("k", true), None);
        assert_eq!(parse_whole("_1", false), None);
        assert_eq!(parse_whole("-1", false), None);
        assert_eq!(parse_whole("18446744073709551615", false), Some(u64::MAX));
        assert_eq!(parse_whole("18446744073709551616", false), None);
        assert_eq!(parse_seed("0xff"), Some(255));
        assert_eq!(parse_seed("42"), Some(42));
        assert_eq!(seed("0xg").unwrap_err(), "\"0xg\" is not a 64-bit number");
    }

    #[test]
    fn counts_and_ranges() {
        assert_eq!(count("3.2M", 1, u64::MAX), Ok(3_200_000));
        assert_eq!(count("0", 1, 10).unwrap_err(), "0 is out of range (1 to 10)");
        assert!(count("lots", 1, 10).unwrap_err().contains("(like 20000, 20k, 3.2M)"));
        assert_eq!(whole("1.5", 1, 10).unwrap_err(), "\"1.5\" is not a whole number");
        assert_eq!(whole("-3", 1, 10).unwrap_err(), "\"-3\" is not a whole number");
        assert_eq!(whole("20k", 1, 100_000).unwrap_err(), "\"20k\" is not a whole number");
        assert_eq!(whole_usize("7", 1, 10), Ok(7));
        assert_eq!(rate("50k"), Ok(50_000.0));
        assert!(rate("0").unwrap_err().starts_with("\"0\" is not a positive"));
    }

    #[test]
    fn byte_sizes() {
        assert_eq!(parse_bytes("1_024"), Some(1024));
        assert_eq!(parse_bytes("1g"), Some(1 << 30));
        assert_eq!(parse_bytes("k"), None);
        assert_eq!(parse_bytes("1kb"), None);
        assert_eq!(parse_bytes("99999999999999999999g"), None);
        let max = ferrite_bench::workloads::io::MAX_BS;
        for (text, bytes) in
            [("4096", 4096), ("4k", 4096), ("8K", 8192), ("1m", 1 << 20), ("2MiB", 2 << 20)]
        {
            assert_eq!(block_size(text, max), Ok(bytes), "{text}");
        }
        assert_eq!(block_size("4000", max).unwrap_err(), "4000 is not a multiple of 4096");
        assert!(block_size("4q", max).unwrap_err().contains("is not a size in bytes"));
        assert!(block_size("32m", max).unwrap_err().starts_with("33554432 is out of range"));
    }

    #[test]
    fn seconds_and_lists_of_them() {
        assert_eq!(seconds("0.5"), Ok(0.5));
        for bad in ["0", "-1", "inf", "NaN", "x", "1e7"] {
            assert!(seconds(bad).unwrap_err().contains("not a positive number of seconds"));
        }
        assert_eq!(seconds_list("10,30,60"), Ok(vec![10.0, 30.0, 60.0]));
        assert_eq!(seconds_list("0.3,0.6"), Ok(vec![0.3, 0.6]));
        assert!(seconds_list("10,,30").unwrap_err().starts_with("\"\" is not a"));
        assert!(seconds_list("10,x").unwrap_err().starts_with("\"x\" is not a positive"));
        assert!(seconds_list("0.0001").unwrap_err().contains("shorter than 1 ms"));
        let many = vec!["1"; recovery::MAX_RUNS + 1].join(",");
        assert!(seconds_list(&many).unwrap_err().contains("at most 64 allowed"));
    }

    #[test]
    fn names_and_paths() {
        assert_eq!(store("rocksdb"), Ok(StoreKind::RocksDb));
        assert!(store("mysql").unwrap_err().starts_with("unknown store \"mysql\""));
        assert_eq!(engine("aio"), Ok(EngineKind::Aio));
        assert!(engine("all").unwrap_err().contains("unknown engine \"all\""));
        assert_eq!(engines("all").unwrap()[0], EngineKind::IoUring, "io_uring first");
        assert_eq!(engines("all").unwrap(), EngineKind::ALL.to_vec());
        assert!(engines("spdk").unwrap_err().contains("unknown engine \"spdk\""));
        assert_eq!(pattern("seqwrite"), Ok(Pattern::SeqWrite));
        assert!(pattern("rand").unwrap_err().contains("unknown pattern \"rand\""));
        assert_eq!(distribution("uniform"), Ok(Distribution::Uniform));
        assert!(distribution("x").unwrap_err().contains("is not uniform or zipfian"));
        assert_eq!(order("sequential"), Ok(Order::Sequential));
        assert!(order("up").unwrap_err().contains("\"up\" is not seq or random"));
        assert!(suite("huge").unwrap_err().contains("unknown suite \"huge\""));
        assert_eq!(suite("quick").as_deref(), Ok("quick"));
        assert_eq!(path(OsString::new()).unwrap_err(), "must not be empty");
        let devices = paths("/dev/nvme0n1,/dev/nvme1n1,data/file".into()).unwrap();
        assert_eq!(devices.len(), 3);
        assert!(paths("a,,b".into()).unwrap_err().contains("has an empty path"));
        assert_eq!(file_arg("-".into()), Ok(FileArg::Std));
        assert_eq!(file_arg("./-".into()), Ok(FileArg::Path(PathBuf::from("./-"))));
        assert_eq!(file_arg(OsString::new()).unwrap_err(), "must not be empty");
    }

    #[test]
    fn object_offsets_and_lengths() {
        assert_eq!(object_bytes("0"), Ok(0));
        assert_eq!(object_bytes("4097"), Ok(4097));
        assert_eq!(object_bytes("1k"), Ok(1024));
        assert_eq!(object_bytes("3m"), Ok(3 << 20));
        assert_eq!(object_bytes("2GiB"), Ok(2 << 30));
        assert_eq!(object_bytes("1_048_576"), Ok(1 << 20));
        assert_eq!(object_bytes(&ferrite::MAX_OBJECT_LEN.to_string()), Ok(1 << 40));
        assert!(object_bytes("1099511627777").unwrap_err().contains("is out of range (0 to"));
        assert!(object_bytes("-1").unwrap_err().contains("is not a number of bytes"));
        assert!(object_bytes("1.5k").unwrap_err().contains("is not a number of bytes"));
        assert!(object_bytes("").unwrap_err().contains("is not a number of bytes"));
    }
}
