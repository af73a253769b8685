//! The `ferrite` command: store, inspect, check and benchmark Ferrite data directories.
//!
//! `args` turns the command line into a `Command`; one module per group of subcommands
//! runs it (`data`: put/get/del/scan, `admin`: trees/stats/check, `bench`: workloads from
//! `ferrite-bench`). Exit status: 0 success, 1 key absent or faults found, 2 any error.

mod admin;
mod args;
mod bench;
mod common;
mod data;
mod encoding;
mod help;

use std::ffi::OsString;
use std::io::{self, BufWriter};
use std::process::ExitCode;

use args::Command;
use common::{CliError, Outcome, ERROR_STATUS};

fn main() -> ExitCode {
    let argv: Vec<OsString> = std::env::args_os().skip(1).collect();
    let command = match args::parse(&argv) {
        Ok(command) => command,
        Err(e) => {
            eprintln!("ferrite: {e}");
            return ExitCode::from(ERROR_STATUS);
        }
    };
    match run(command) {
        Ok(outcome) => ExitCode::from(outcome.exit_status()),
        // The reader is gone (`ferrite scan | head`): stop quietly.
        Err(e) if e.is_broken_pipe() => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferrite: {e}");
            ExitCode::from(ERROR_STATUS)
        }
    }
}

fn run(command: Command) -> Result<Outcome, CliError> {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    match command {
        Command::Help(text) => {
            use std::io::Write;
            out.write_all(text.as_bytes())?;
            out.flush()?;
            Ok(Outcome::Done)
        }
        Command::Version => {
            use std::io::Write;
            writeln!(out, "ferrite {}", env!("CARGO_PKG_VERSION"))?;
            out.flush()?;
            Ok(Outcome::Done)
        }
        Command::Put(a) => data::put(&a),
        Command::Get(a) => data::get(&a, &mut out),
        Command::Del(a) => data::del(&a),
        Command::Scan(a) => data::scan(&a, &mut out),
        Command::Trees(a) => admin::trees(&a, &mut out),
        Command::Stats(a) => admin::stats(&a, &mut out),
        Command::Check(a) => admin::check(&a, &mut out),
        Command::BenchLookup(config) => bench::lookup(&config, &mut out),
        Command::BenchIo(config) => bench::io(&config, &mut out),
        Command::BenchWorkload(config) => bench::workload(&config, &mut out),
        Command::BenchCompare(args) => bench::compare(&args, &mut out),
        Command::BenchRecovery(config) => bench::recovery(&config, &mut out),
    }
}
