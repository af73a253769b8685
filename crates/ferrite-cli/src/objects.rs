//! The object commands: `write-at` and `read-at` (bytes at an offset of a value, moved in
//! pieces of at most [`PIECE`] bytes so a big file never sits in memory whole) and `stat` (a
//! value's size and how it is stored). Like the data commands, each runs its operation,
//! closes the directory, and exits with the operation's outcome.

use std::io::{Read, Write};

use ferrite::{ObjectStat, Tree};
use ferrite_bench::report::{bytes, thousands};

use crate::cli::{KeyArgs, ReadAtArgs, ValueSource, WriteAtArgs};
use crate::common::{open, operate_then_close, Access, Change, CliError, Outcome};
use crate::data::note_absent;
use crate::encoding::field;
use crate::files::{Input, Output};

/// Most bytes one `write_at` or `read_at` moves: 8 MiB.
pub const PIECE: u64 = 8 << 20;

const PAGE_BYTES: u64 = 4096;

pub fn write_at(args: &WriteAtArgs) -> Result<Outcome, CliError> {
    // The file first: one that cannot be read fails before the directory is touched.
    let mut input = match &args.value {
        ValueSource::Arg(bytes) => Input::bytes(bytes),
        ValueSource::File(file) => Input::open(file)?,
    };
    if let Some(len) = input.len() {
        if args.offset.saturating_add(len) > ferrite::MAX_OBJECT_LEN {
            return Err(CliError::Refused(format!(
                "{len} bytes from offset {} would end past the largest value ({} bytes): \
                 nothing was written",
                args.offset,
                ferrite::MAX_OBJECT_LEN
            )));
        }
    }
    let db = open(&args.db, Access::Create)?;
    operate_then_close(db, &args.db.dir, |db| {
        let tree = db.tree(&args.tree)?;
        write_pieces(&tree, &args.key, args.offset, &mut input)?;
        Ok((Outcome::Done, Change::Durable("the write-at".into())))
    })
}

/// Writes what `input` holds into `key` from `offset` on, [`PIECE`] bytes at a time; returns
/// the bytes written. An empty input is one empty write (which creates an absent key).
fn write_pieces(tree: &Tree, key: &[u8], offset: u64, input: &mut Input) -> Result<u64, CliError> {
    let partial = |error: CliError, written: u64| match written {
        0 => error,
        _ => CliError::Partial { error: Box::new(error), offset, written },
    };
    let mut piece = Vec::with_capacity(input.len().unwrap_or(PIECE).min(PIECE) as usize);
    let mut written = 0u64;
    loop {
        piece.clear();
        if let Err(e) = Read::by_ref(input).take(PIECE).read_to_end(&mut piece) {
            return Err(partial(input.blame(e), written));
        }
        if piece.is_empty() && written > 0 {
            return Ok(written);
        }
        if let Err(e) = tree.write_at(key, offset + written, &piece) {
            return Err(partial(e.into(), written));
        }
        written += piece.len() as u64;
        if (piece.len() as u64) < PIECE {
            return Ok(written);
        }
    }
}

pub fn read_at(args: &ReadAtArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    // Opened first: a path that cannot be written fails before the directory is opened.
    let mut output = Output::open(args.output.as_ref(), out)?;
    let key = &args.key;
    let db = open(&key.db, Access::ReadOnly)?;
    let read = operate_then_close(db, &key.db.dir, |db| {
        let tree = db.open_tree(&key.tree)?;
        Ok((read_pieces(&tree, args, &mut output)?, Change::Nothing("the read-at".into())))
    })?;
    let Some(read) = read else {
        note_absent(key);
        return Ok(Outcome::Absent);
    };
    output.finish()?;
    if read < args.length {
        eprintln!(
            "ferrite: note: the value ends before the range does: {read} of the {} bytes asked \
             for were read",
            args.length
        );
    }
    Ok(Outcome::Done)
}

/// Copies the range of `args` to `output`, [`PIECE`] bytes at a time: `None` if the key is
/// absent, else the bytes copied (fewer than asked for where the value ends first).
fn read_pieces(
    tree: &Tree,
    args: &ReadAtArgs,
    output: &mut Output,
) -> Result<Option<u64>, CliError> {
    let mut piece = vec![0u8; args.length.min(PIECE) as usize];
    let mut read = 0u64;
    loop {
        let want = (args.length - read).min(PIECE) as usize;
        let Some(n) = tree.read_at(&args.key.key, args.offset + read, &mut piece[..want])? else {
            // (Absent after a first piece was read cannot happen: the directory is shared
            // with readers only while this command holds it.)
            return Ok((read > 0).then_some(read));
        };
        output.write_all(&piece[..n]).map_err(|e| output.blame(e))?;
        read += n as u64;
        if n < want || read == args.length {
            return Ok(Some(read));
        }
    }
}

pub fn stat(args: &KeyArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    let db = open(&args.db, Access::ReadOnly)?;
    let stat = operate_then_close(db, &args.db.dir, |db| {
        let stat = db.open_tree(&args.tree)?.object_stat(&args.key)?;
        Ok((stat, Change::Nothing("the stat".into())))
    })?;
    let Some(stat) = stat else {
        note_absent(args);
        return Ok(Outcome::Absent);
    };
    write_stat(out, &field(&args.key, args.hex), &stat)?;
    out.flush()?;
    Ok(Outcome::Done)
}

/// `stat`'s block for people, then its `result` line.
fn write_stat(out: &mut dyn Write, key: &str, stat: &ObjectStat) -> std::io::Result<()> {
    let size = match stat.len {
        len if len < 1024 => bytes(len),
        len => format!("{} bytes ({})", thousands(len), bytes(len)),
    };
    let stored = if stat.inline {
        "inline (a small value, in its leaf or a value page)"
    } else {
        "as an object (extents and fragments)"
    };
    let extent_bytes = stat.extent_pages * PAGE_BYTES;
    for (label, text) in [
        ("key", key.to_owned()),
        ("size", size),
        ("stored", stored.to_owned()),
        ("extents", thousands(stat.extents)),
        ("extent pages", format!("{} ({})", thousands(stat.extent_pages), bytes(extent_bytes))),
        ("fragments", thousands(stat.fragments)),
        ("fragment bytes", thousands(stat.fragment_bytes)),
    ] {
        writeln!(out, "{label:<16}{text}")?;
    }
    writeln!(
        out,
        "result key={key} size={} inline={} extents={} extent_pages={} fragments={} \
         fragment_bytes={}",
        stat.len, stat.inline, stat.extents, stat.extent_pages, stat.fragments, stat.fragment_bytes
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat_text(key: &str, stat: &ObjectStat) -> String {
        let mut out = Vec::new();
        write_stat(&mut out, key, stat).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn stat_prints_a_block_and_a_result_line() {
        // (`ObjectStat` is `#[non_exhaustive]`: built from its default.)
        let mut object = ObjectStat::default();
        (object.len, object.extents, object.extent_pages) = ((1 << 20) + 3, 1, 256);
        (object.fragments, object.fragment_bytes) = (1, 3);
        assert_eq!(
            stat_text("photo", &object),
            "\
key             photo
size            1,048,579 bytes (1.0 MiB)
stored          as an object (extents and fragments)
extents         1
extent pages    256 (1.0 MiB)
fragments       1
fragment bytes  3
result key=photo size=1048579 inline=false extents=1 extent_pages=256 fragments=1 \
fragment_bytes=3
"
        );
        let mut small = ObjectStat::default();
        (small.len, small.inline) = (5, true);
        let text = stat_text("6b", &small);
        assert!(text.contains("\nsize            5 bytes\n"), "{text}");
        assert!(text.contains("\nstored          inline"), "{text}");
        assert!(text.ends_with(
            "\nresult key=6b size=5 inline=true extents=0 extent_pages=0 fragments=0 \
             fragment_bytes=0\n"
        ));
    }
}
