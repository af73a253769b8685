//! Log fuzzing: the crash image of a database (several log segments, one of them before the
//! last checkpoint, every commit acknowledged with `Durability::Sync`) is damaged in every
//! way a disk or a careless hand can — every byte of every segment header, every byte of the
//! sectors holding the last records and the end of the log, a sample of bytes anywhere,
//! every segment deleted, duplicated under another slot, truncated — and opened. Each case
//! must either recover every acknowledged commit exactly (and `check` finds the trees whole)
//! or fail with `Error::LogCorrupt` naming the file and a position: never a silent cut.
//!
//! Runs on the simulated disk (a copy of the image per case, in memory). `FERRITE_SEED`
//! replays one image; `FERRITE_LOG_FUZZ_SAMPLE=N` flips N bytes of each file at random
//! (24 by default) besides the header and the end of the log, which are flipped whole.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{seeds, sim_options, Rng, TempDir};
use ferrite::testing::SimDisk;
use ferrite::wal::segment::{SECTOR_BYTES, SECTOR_HEADER_BYTES, SECTOR_PAYLOAD};
use ferrite::{Db, Durability, Error, Options, WriteBatch};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const HEADER_BYTES: usize = 4096;

/// A crash image: the disk, and what every acknowledged commit left in tree "t".
struct Image {
    disk: Arc<SimDisk>,
    model: Model,
    /// Where the log's records end (from `check_log` on the intact image).
    end_lsn: u64,
}

fn options(disk: &Arc<SimDisk>) -> Options {
    Options { durability: Durability::Sync, ..sim_options(disk) }
}

/// Commits batches of puts (small values and values for Value pages) and deletes until the
/// log spans a few segments, with a checkpoint two thirds of the way (the segments before it
/// are no longer needed), then crashes.
fn build(seed: u64, dir: &TempDir) -> Image {
    let disk = SimDisk::new(seed);
    let db = Db::open(dir.path(), options(&disk)).unwrap();
    let tree = db.tree("t").unwrap();
    let mut rng = Rng::new(seed);
    let mut model = Model::new();
    let commits = 1_500;
    for commit in 0..commits {
        if commit == commits * 2 / 3 {
            db.checkpoint().unwrap();
        }
        let mut batch = WriteBatch::new();
        for _ in 0..1 + rng.below(3) {
            let key = format!("key-{:05}", rng.below(2_000)).into_bytes();
            if rng.below(6) == 0 {
                batch.delete(&tree, &key);
                model.remove(&key);
            } else {
                let len = if rng.below(4) == 0 { 1_600 + rng.below(2_000) } else { rng.below(400) };
                let value = rng.bytes(len as usize);
                batch.put(&tree, &key, &value);
                model.insert(key, value);
            }
        }
        db.write(&batch).unwrap();
    }
    let end_lsn = db.check_log().unwrap().expect("a log").end_lsn;
    drop(tree);
    disk.crash();
    db.abandon();
    Image { disk, model, end_lsn }
}

/// The log's segment files, by name, with their start LSN (0 for a file with no header).
fn segments(disk: &SimDisk) -> Vec<(String, u64, usize)> {
    disk.file_names()
        .into_iter()
        .filter(|name| name.starts_with("wal/"))
        .map(|name| {
            let bytes = disk.read_file(&name).unwrap();
            let start = bytes.get(16..24).map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()));
            (name, start, bytes.len())
        })
        .collect()
}

/// One way of damaging the image.
#[derive(Debug, Clone)]
enum Damage {
    Nothing,
    Flip { file: String, offset: usize },
    Delete { file: String },
    Duplicate { file: String },
    Truncate { file: String, len: usize },
}

impl Damage {
    fn apply(&self, disk: &SimDisk) {
        match self {
            Damage::Nothing => {}
            Damage::Flip { file, offset } => {
                let mut bytes = disk.read_file(file).unwrap();
                bytes[*offset] ^= 0x5A;
                disk.replace_file(file, &bytes);
            }
            Damage::Delete { file } => {
                ferrite::io::Storage::remove(disk, file).unwrap();
            }
            Damage::Duplicate { file } => {
                let bytes = disk.read_file(file).unwrap();
                disk.replace_file("wal/000099.log", &bytes);
            }
            Damage::Truncate { file, len } => {
                let mut bytes = disk.read_file(file).unwrap();
                bytes.truncate(*len);
                disk.replace_file(file, &bytes);
            }
        }
    }
}

/// The file offset of stream position `lsn` in a segment starting at `start`.
fn file_offset(start: u64, lsn: u64) -> usize {
    let at = (lsn - start) as usize;
    HEADER_BYTES + at / SECTOR_PAYLOAD * SECTOR_BYTES + SECTOR_HEADER_BYTES + at % SECTOR_PAYLOAD
}

/// Every case for `image`.
fn cases(image: &Image, seed: u64) -> Vec<Damage> {
    let sample: u64 = match std::env::var("FERRITE_LOG_FUZZ_SAMPLE") {
        Ok(n) => n.parse().expect("FERRITE_LOG_FUZZ_SAMPLE must be a number"),
        Err(_) => 24,
    };
    let mut rng = Rng::new(seed ^ 0xF022);
    let files = segments(&image.disk);
    assert!(files.len() >= 3, "the image has too few segments: {files:?}");
    let mut cases = Vec::new();
    for (file, start, len) in &files {
        // Every header byte that means something, and a sample of the zeros after.
        let header: Vec<usize> =
            (0..HEADER_BYTES).filter(|&o| o < 40 || rng.below(256) == 0).collect();
        cases.extend(header.into_iter().map(|offset| Damage::Flip { file: file.clone(), offset }));
        cases.push(Damage::Delete { file: file.clone() });
        cases.push(Damage::Duplicate { file: file.clone() });
        for cut in [
            0,
            16,
            HEADER_BYTES,
            HEADER_BYTES + 5 * SECTOR_BYTES + 7,
            len / 2,
            len - SECTOR_BYTES,
            len - 1,
        ] {
            cases.push(Damage::Truncate { file: file.clone(), len: cut });
        }
        // The end of the log: every byte of the sectors holding the last records and the
        // sector after them (framing and payload), when this segment holds them.
        let capacity = (len - HEADER_BYTES) / SECTOR_BYTES * SECTOR_PAYLOAD;
        let end = image.end_lsn;
        if *start <= end && end < start + capacity as u64 {
            let from = end.saturating_sub(1_500).max(*start);
            let first = file_offset(*start, from) / SECTOR_BYTES * SECTOR_BYTES;
            let last = (file_offset(*start, end) / SECTOR_BYTES + 2) * SECTOR_BYTES;
            cases.extend(
                (first..last.min(*len)).map(|offset| Damage::Flip { file: file.clone(), offset }),
            );
        }
        // A sample anywhere in the file.
        for _ in 0..sample {
            let offset = HEADER_BYTES + rng.below((len - HEADER_BYTES) as u64) as usize;
            cases.push(Damage::Flip { file: file.clone(), offset });
        }
    }
    cases
}

/// What opening a damaged image did.
#[derive(Debug, Default)]
struct Tally {
    cases: u64,
    recovered: u64,
    refused: u64,
    read_only_checked: u64,
    /// By kind of damage: cases recovered, refused.
    by_kind: BTreeMap<&'static str, (u64, u64)>,
}

impl Damage {
    /// The kind of damage, for the tally.
    fn kind(&self) -> &'static str {
        match self {
            Damage::Nothing => "nothing",
            Damage::Flip { offset, .. } if *offset < 32 => "header byte",
            Damage::Flip { offset, .. } if *offset < HEADER_BYTES => "header padding byte",
            Damage::Flip { offset, .. } if (offset - HEADER_BYTES) % SECTOR_BYTES < 16 => {
                "sector framing byte"
            }
            Damage::Flip { .. } => "sector payload byte",
            Damage::Delete { .. } => "segment deleted",
            Damage::Duplicate { .. } => "segment duplicated",
            Damage::Truncate { .. } => "segment truncated",
        }
    }
}

/// Reads tree "t" whole.
fn contents(db: &Db) -> ferrite::Result<Model> {
    let tree = db.open_tree("t")?;
    tree.iter().collect()
}

/// Opens a copy of `image` damaged by `damage` (read-only first on every fourth case, then
/// for writing) and judges the outcome.
fn try_case(image: &Image, damage: &Damage, index: usize, tally: &mut Tally) {
    let disk = image.disk.copy_durable();
    damage.apply(&disk);
    let dir = TempDir::with_prefix("log-fuzz-case").unwrap();
    let judge = |opened: ferrite::Result<Db>, how: &str| -> Option<Db> {
        match opened {
            Ok(db) => {
                let have =
                    contents(&db).unwrap_or_else(|e| panic!("{damage:?} ({how}): reading: {e}"));
                assert!(have == image.model, "{damage:?} ({how}): recovered, but not every acknowledged commit ({} keys, {} expected): a silent cut", have.len(), image.model.len());
                let report = db.check().unwrap();
                assert!(report.is_ok(), "{damage:?} ({how}): check: {:?}", report.all_faults());
                Some(db)
            }
            Err(Error::LogCorrupt { path, offset, lsn, reason }) => {
                assert!(
                    !path.as_os_str().is_empty(),
                    "{damage:?} ({how}): no file named: {reason}"
                );
                assert!(
                    offset.is_some() || lsn.is_some(),
                    "{damage:?} ({how}): no position: {reason}"
                );
                None
            }
            Err(other) => panic!("{damage:?} ({how}): refused with {other:?}, not LogCorrupt"),
        }
    };
    if index % 4 == 0 {
        let read_only = Options { read_only: true, ..options(&disk) };
        if let Some(db) = judge(Db::open(dir.path(), read_only), "read-only") {
            db.close().unwrap();
        }
        tally.read_only_checked += 1;
    }
    tally.cases += 1;
    let kind = tally.by_kind.entry(damage.kind()).or_default();
    match judge(Db::open(dir.path(), options(&disk)), "writable") {
        Some(db) => {
            tally.recovered += 1;
            kind.0 += 1;
            db.close().unwrap();
        }
        None => {
            tally.refused += 1;
            kind.1 += 1;
        }
    }
}

#[test]
fn a_damaged_log_recovers_every_acknowledged_commit_or_is_refused_by_name() {
    let mut total = Tally::default();
    for seed in seeds(1) {
        let dir = TempDir::with_prefix("log-fuzz").unwrap();
        let image = build(seed, &dir);
        // The intact image recovers everything.
        let mut intact = Tally::default();
        try_case(&image, &Damage::Nothing, 0, &mut intact);
        assert_eq!(intact.recovered, 1, "the intact image was refused");
        let cases = cases(&image, seed);
        for (index, damage) in cases.iter().enumerate() {
            try_case(&image, damage, index, &mut total);
        }
    }
    eprintln!("log fuzzing: {total:#?}");
    // Damage where the log needs no bytes (header padding, segments before the checkpoint)
    // recovers; damage to what it needs is refused. Both must have happened.
    let padding = total.by_kind["header padding byte"];
    assert!(padding.0 > 10 && padding.1 == 0, "{total:#?}");
    for kind in ["header byte", "sector framing byte", "sector payload byte", "segment deleted"] {
        assert!(total.by_kind[kind].1 > 0, "{kind} never refused: {total:#?}");
    }
    assert!(total.recovered > 40 && total.refused > 1_000, "{total:#?}");
}
