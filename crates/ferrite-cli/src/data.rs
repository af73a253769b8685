//! The data commands: `put`, `get`, `del` and `scan`. Each runs its operation, closes the
//! directory, and exits with the operation's outcome (`common::operate_then_close`). A value
//! given as a file (`put --value-file`) or asked for as one (`get --output`) is streamed
//! through `files`.

use std::io::Write;
use std::ops::Bound;

use crate::cli::{GetArgs, KeyArgs, PutArgs, ScanArgs, ValueSource};
use crate::common::{open, operate_then_close, Access, Change, CliError, Outcome};
use crate::encoding::{encode_hex, escape_if_not_utf8, field};
use crate::files::{Input, Output};
use crate::value::FileArg;

pub fn put(args: &PutArgs) -> Result<Outcome, CliError> {
    let file = match &args.value {
        ValueSource::Arg(value) => {
            let db = open(&args.db, Access::Create)?;
            return operate_then_close(db, &args.db.dir, |db| {
                db.tree(&args.tree)?.put(&args.key, value)?;
                Ok((Outcome::Done, Change::Durable("the put".into())))
            });
        }
        ValueSource::File(file) => file,
    };
    // The file first: one that cannot be read fails before the directory is touched.
    let mut input = Input::open(file)?;
    if let Some(len) = input.len().filter(|&len| len > ferrite::MAX_OBJECT_LEN) {
        return Err(CliError::Refused(format!(
            "{} holds {len} bytes, more than the largest value ({} bytes)",
            input.from(),
            ferrite::MAX_OBJECT_LEN
        )));
    }
    let db = open(&args.db, Access::Create)?;
    operate_then_close(db, &args.db.dir, |db| {
        let tree = db.tree(&args.tree)?;
        tree.put_from(&args.key, &mut input).map_err(|e| input.blame(e))?;
        Ok((Outcome::Done, Change::Durable("the put".into())))
    })
}

pub fn get(args: &GetArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    match &args.output {
        None => print_value(&args.key, out),
        Some(file) => stream_value(&args.key, file, out),
    }
}

/// `get --output PATH`: the raw value streamed into PATH (or standard output, `out`).
fn stream_value(args: &KeyArgs, file: &FileArg, out: &mut dyn Write) -> Result<Outcome, CliError> {
    // Opened first: a path that cannot be written fails before the directory is opened.
    let mut output = Output::open(Some(file), out)?;
    let db = open(&args.db, Access::ReadOnly)?;
    let len = operate_then_close(db, &args.db.dir, |db| {
        let tree = db.open_tree(&args.tree)?;
        let len = tree.get_into(&args.key, &mut output).map_err(|e| output.blame(e))?;
        Ok((len, Change::Nothing("the get".into())))
    })?;
    if len.is_none() {
        note_absent(args);
        return Ok(Outcome::Absent);
    }
    output.finish()?;
    Ok(Outcome::Done)
}

/// `get`: the value printed as text (escaped if it is not UTF-8) or hex, and a newline.
fn print_value(args: &KeyArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    let db = open(&args.db, Access::ReadOnly)?;
    let value = operate_then_close(db, &args.db.dir, |db| {
        Ok((db.open_tree(&args.tree)?.get(&args.key)?, Change::Nothing("the get".into())))
    })?;
    let Some(value) = value else {
        note_absent(args);
        return Ok(Outcome::Absent);
    };
    if args.hex {
        writeln!(out, "{}", encode_hex(&value))?;
    } else if let Some(escaped) = escape_if_not_utf8(&value) {
        eprintln!(
            "ferrite: note: the value is not UTF-8; its invalid bytes are shown as \\xNN \
             (use --hex for the exact bytes)"
        );
        writeln!(out, "{escaped}")?;
    } else {
        out.write_all(&value)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(Outcome::Done)
}

pub fn del(args: &KeyArgs) -> Result<Outcome, CliError> {
    let db = open(&args.db, Access::Existing)?;
    let removed = operate_then_close(db, &args.db.dir, |db| {
        let removed = db.open_tree(&args.tree)?.delete(&args.key)?;
        let what = "the del".to_owned();
        Ok((removed, if removed { Change::Durable(what) } else { Change::Nothing(what) }))
    })?;
    if removed {
        Ok(Outcome::Done)
    } else {
        note_absent(args);
        Ok(Outcome::Absent)
    }
}

/// Says on stderr that the key of `args` is absent (exit status 1 follows).
pub fn note_absent(args: &KeyArgs) {
    eprintln!("ferrite: key {} not found in tree {:?}", field(&args.key, args.hex), args.tree);
}

pub fn scan(args: &ScanArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    let db = open(&args.db, Access::ReadOnly)?;
    operate_then_close(db, &args.db.dir, |db| {
        write_range(db, args, out)?;
        Ok((Outcome::Done, Change::Nothing("the scan".into())))
    })
}

/// The entries `scan` asks for, on `out`, one line each.
fn write_range(db: &ferrite::Db, args: &ScanArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let tree = db.open_tree(&args.tree)?;
    let lower = args.from.as_deref().map_or(Bound::Unbounded, Bound::Included);
    let upper = args.to.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
    let empty = matches!((&args.from, &args.to), (Some(from), Some(to)) if from >= to);
    if !empty {
        let entries = match args.reverse {
            true => tree.range_rev::<&[u8], _>((lower, upper)),
            false => tree.range::<&[u8], _>((lower, upper)),
        };
        let limit = usize::try_from(args.limit.unwrap_or(u64::MAX)).unwrap_or(usize::MAX);
        for entry in entries.take(limit) {
            let (key, value) = entry?;
            writeln!(out, "{}\t{}", field(&key, args.hex), field(&value, args.hex))?;
        }
    }
    out.flush()?;
    Ok(())
}
