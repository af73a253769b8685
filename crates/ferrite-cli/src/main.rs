//! The `ferrite` command: store, inspect, check and benchmark Ferrite data directories.
//!
//! `args` turns the command line into a `Command`; one module per group of subcommands
//! runs it (`data`: put/get/del/scan, `admin`: trees/stats/check, `bench`: workloads from
//! `ferrite-bench`). Exit status: 0 success, 1 key absent or faults found, 2 any error.
//! A command that prints fails before it starts when standard output cannot be written
//! (`output`).

mod admin;
mod args;
mod bench;
mod common;
mod data;
mod encoding;
mod help;
mod output;

use std::ffi::OsString;
use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use args::{Command, TreesAction};
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
    let mut out: Box<dyn Write> = if prints(&command) {
        Box::new(BufWriter::new(output::stdout()?))
    } else {
        Box::new(io::sink())
    };
    let out = &mut *out;
    match command {
        Command::Help(text) => {
            out.write_all(text.as_bytes())?;
            out.flush()?;
            Ok(Outcome::Done)
        }
        Command::Version => {
            writeln!(out, "ferrite {}", env!("CARGO_PKG_VERSION"))?;
            out.flush()?;
            Ok(Outcome::Done)
        }
        Command::Put(a) => data::put(&a),
        Command::Get(a) => data::get(&a, out),
        Command::Del(a) => data::del(&a),
        Command::Scan(a) => data::scan(&a, out),
        Command::Trees(a) => admin::trees(&a, out),
        Command::Stats(a) => admin::stats(&a, out),
        Command::Check(a) => admin::check(&a, out),
        Command::BenchLookup(config) => bench::lookup(&config, out),
        Command::BenchIo(config) => bench::io(&config, out),
        Command::BenchWorkload(config) => bench::workload(&config, out),
        Command::BenchCompare(args) => bench::compare(&args, out),
        Command::BenchRecovery(config) => bench::recovery(&config, out),
    }
}

/// Whether `command` prints on standard output (every command but those that change the
/// data directory and print nothing: put, del, trees --create and --drop).
fn prints(command: &Command) -> bool {
    match command {
        Command::Put(_) | Command::Del(_) => false,
        Command::Trees(args) => args.action == TreesAction::List,
        _ => true,
    }
}
