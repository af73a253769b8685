//! The `ferrite` command: store, inspect, check and benchmark Ferrite data directories.
//!
//! `cli` declares the command line (clap derive, units parsed by `value`) and turns it into
//! an `Action`; one module per group of subcommands runs it (`data`: put/get/del/scan,
//! `objects`: write-at/read-at/stat, `admin`: trees/stats/check, `bench`: workloads from
//! `ferrite-bench`); `files` streams values from and to files. Exit status: 0 success, 1 key
//! absent or faults found, 2 any error.
//! A command that prints fails before it starts when standard output cannot be written
//! (`output`).

mod admin;
mod bench;
mod cli;
mod common;
mod data;
mod dump;
mod encoding;
mod files;
mod maintain;
mod objects;
mod output;
mod serve;
mod value;

use std::ffi::OsString;
use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use cli::{Action, Cli, GetArgs, ReadAtArgs, TreesAction};
use common::{CliError, Outcome, ERROR_STATUS};
use value::FileArg;

/// mimalloc instead of glibc's malloc: the engine allocates a transaction's keys and values,
/// and glibc's malloc and free took about 11 % of TPC-C's CPU in memory (perf). The engine
/// crate leaves the allocator to the program that embeds it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    init_logging();
    let argv: Vec<OsString> = std::env::args_os().skip(1).collect();
    let action = match Cli::parse_args(&argv) {
        Ok(action) => action,
        Err(e) => {
            eprintln!("ferrite: {e}");
            return ExitCode::from(ERROR_STATUS);
        }
    };
    match run(action) {
        Ok(outcome) => ExitCode::from(outcome.exit_status()),
        // The reader is gone (`ferrite scan | head`): stop quietly.
        Err(e) if e.is_broken_pipe() => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferrite: {e}");
            ExitCode::from(ERROR_STATUS)
        }
    }
}

/// What the engine logs through the `log` facade goes to stderr as `ferrite: LEVEL: ...`
/// lines: warnings and errors unless `RUST_LOG` says otherwise (`RUST_LOG=info`,
/// `RUST_LOG=ferrite=debug`).
fn init_logging() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .format(|buf, record| {
            let level = record.level().to_string().to_lowercase();
            writeln!(buf, "ferrite: {level}: {}", record.args())
        })
        .init();
}

fn run(command: Action) -> Result<Outcome, CliError> {
    let mut out: Box<dyn Write> = if prints(&command) {
        Box::new(BufWriter::new(output::stdout()?))
    } else {
        Box::new(io::sink())
    };
    let out = &mut *out;
    match command {
        Action::Help(text) => {
            out.write_all(text.as_bytes())?;
            out.flush()?;
            Ok(Outcome::Done)
        }
        Action::Version => {
            writeln!(out, "ferrite {}", env!("CARGO_PKG_VERSION"))?;
            out.flush()?;
            Ok(Outcome::Done)
        }
        Action::Put(a) => data::put(&a),
        Action::Get(a) => data::get(&a, out),
        Action::Del(a) => data::del(&a),
        Action::Scan(a) => data::scan(&a, out),
        Action::Dump(a) => dump::dump(&a, out),
        Action::Load(a) => load(&a),
        Action::Backup(a) => maintain::backup(&a, out),
        Action::Compact(a) => maintain::compact(&a, out),
        Action::WriteAt(a) => objects::write_at(&a),
        Action::ReadAt(a) => objects::read_at(&a, out),
        Action::Stat(a) => objects::stat(&a, out),
        Action::Trees(a) => admin::trees(&a, out),
        Action::Stats(a) => admin::stats(&a, out),
        Action::Check(a) => admin::check(&a, out),
        Action::BenchLookup(config) => bench::lookup(&config, out),
        Action::BenchIo(config) => bench::io(&config, out),
        Action::BenchObjects(config) => bench::objects(&config, out),
        Action::BenchWorkload(config) => bench::workload(&config, out),
        Action::BenchCompare(args) => bench::compare(&args, out),
        Action::BenchRecovery(config) => bench::recovery(&config, out),
        Action::BenchServe(config) => bench::serve(&config, out),
        Action::BenchTpcc(config) => bench::tpcc(&config, out),
        Action::Serve(args) => serve::serve(&args, out),
        Action::Completions(shell) => {
            clap_complete::generate(shell, &mut cli::command(), "ferrite", out);
            out.flush()?;
            Ok(Outcome::Done)
        }
    }
}

/// Whether `command` prints on standard output (every command but those that change the
/// data directory and print nothing: put, write-at, del, trees --create and --drop; and
/// those that write into a file: get and read-at with --output PATH).
fn prints(command: &Action) -> bool {
    match command {
        Action::Put(_) | Action::WriteAt(_) | Action::Del(_) | Action::Load(_) => false,
        Action::Trees(args) => args.action == TreesAction::List,
        Action::Get(GetArgs { output, .. }) | Action::ReadAt(ReadAtArgs { output, .. }) => {
            !matches!(output, Some(FileArg::Path(_)))
        }
        _ => true,
    }
}

/// `ferrite load` from standard input, buffered; its size is known when it is a file.
fn load(args: &cli::LoadArgs) -> Result<Outcome, CliError> {
    use std::os::fd::AsFd;
    let stdin = io::stdin();
    let size = std::fs::File::from(stdin.as_fd().try_clone_to_owned()?)
        .metadata()
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len());
    let mut input = io::BufReader::with_capacity(1 << 20, stdin.lock());
    dump::load(args, &mut input, size)
}
