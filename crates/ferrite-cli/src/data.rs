//! The data commands: `put`, `get`, `del` and `scan`.

use std::io::Write;
use std::ops::Bound;

use crate::args::{KeyArgs, PutArgs, ScanArgs};
use crate::common::{open, Access, CliError, Outcome};
use crate::encoding::{encode_hex, escape_if_not_utf8, field};

pub fn put(args: &PutArgs) -> Result<Outcome, CliError> {
    let db = open(&args.db, Access::Create)?;
    db.tree(&args.tree)?.put(&args.key, &args.value)?;
    db.close()?;
    Ok(Outcome::Done)
}

pub fn get(args: &KeyArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    let db = open(&args.db, Access::ReadOnly)?;
    let value = db.open_tree(&args.tree)?.get(&args.key)?;
    db.close()?;
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
    let removed = db.open_tree(&args.tree)?.delete(&args.key)?;
    db.close()?;
    if removed {
        Ok(Outcome::Done)
    } else {
        note_absent(args);
        Ok(Outcome::Absent)
    }
}

fn note_absent(args: &KeyArgs) {
    eprintln!("ferrite: key {} not found in tree {:?}", field(&args.key, args.hex), args.tree);
}

pub fn scan(args: &ScanArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    let db = open(&args.db, Access::ReadOnly)?;
    let tree = db.open_tree(&args.tree)?;
    let lower = args.from.as_deref().map_or(Bound::Unbounded, Bound::Included);
    let upper = args.to.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
    let empty = matches!((&args.from, &args.to), (Some(from), Some(to)) if from >= to);
    if !empty {
        let entries =
            if args.reverse { tree.range_rev((lower, upper)) } else { tree.range((lower, upper)) };
        let limit = usize::try_from(args.limit.unwrap_or(u64::MAX)).unwrap_or(usize::MAX);
        for entry in entries.take(limit) {
            let (key, value) = entry?;
            writeln!(out, "{}\t{}", field(&key, args.hex), field(&value, args.hex))?;
        }
    }
    out.flush()?;
    db.close()?;
    Ok(Outcome::Done)
}
