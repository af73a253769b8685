//! Where two byte strings of one length differ, as stretches: what a commit record logs of
//! a page it changed (`wal::record::diff_spans`), and what an update of a value of the same
//! length writes (`btree::node`, `NodeMut::overwrite`). Differences closer than [`GAP`]
//! bytes share a stretch: each stretch costs a record a few bytes of its own.

/// Equal bytes that part two stretches; shorter runs of equal bytes lie inside one.
pub const GAP: usize = 8;

/// The first stretch where `after` differs from `before` (one length) at or after `from`:
/// `(start, end)`, from the first differing byte to one past the last one that follows
/// another within [`GAP`] bytes. `None` when they are equal from `from` on.
///
/// Eight bytes at a time where it can: over equal bytes, and along a changed stretch (a
/// slot array shifted by an insert differs for hundreds of bytes), which the byte-at-a-time
/// version spent ~7 % of a durable insert's CPU on.
#[inline]
pub fn next_difference(before: &[u8], after: &[u8], from: usize) -> Option<(usize, usize)> {
    debug_assert_eq!(before.len(), after.len());
    let to = before.len();
    // Little-endian: byte k of the slice is bits 8k..8k+8 of the word.
    let word = |bytes: &[u8], at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let mut i = from;
    // Skip equal 32-byte blocks (one vector compare each), then words, then bytes.
    while i + 32 <= to && before[i..i + 32] == after[i..i + 32] {
        i += 32;
    }
    while i + 8 <= to && word(before, i) == word(after, i) {
        i += 8;
    }
    while i < to && before[i] == after[i] {
        i += 1;
    }
    if i >= to {
        return None;
    }
    // One past the last difference; extend while another follows within the gap.
    let mut end = i + 1;
    while end < to {
        let next = if end + GAP <= to {
            let differs = word(before, end) ^ word(after, end);
            (differs != 0).then(|| end + (63 - differs.leading_zeros() as usize) / 8)
        } else {
            (end..to).rev().find(|&j| before[j] != after[j])
        };
        match next {
            Some(last) => end = last + 1,
            None => break,
        }
    }
    Some((i, end))
}

/// Changes `bytes` for the tests of diffs (here and the log's `diff_region`): up to 40
/// stretches at random places, single bytes, short and long (up to 2000 bytes), every byte
/// of a stretch changed, so gaps of every size lie between them.
#[cfg(test)]
pub(crate) fn scatter_changes(rng: &mut crate::testing::Rng, bytes: &mut [u8]) {
    let len = bytes.len();
    for _ in 0..rng.below(40) {
        let at = rng.index(len + 1);
        let span = match rng.below(4) {
            0 => 1,
            1 => rng.index(12),
            2 => rng.index(300),
            _ => rng.index(2000),
        };
        for b in &mut bytes[at..(at + span).min(len)] {
            *b ^= rng.below(255) as u8 + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte-at-a-time definition: differences closer than `GAP` bytes share a stretch.
    fn reference(before: &[u8], after: &[u8]) -> Vec<(usize, usize)> {
        let (mut out, to, mut i) = (Vec::new(), before.len(), 0);
        while i < to {
            while i < to && before[i] == after[i] {
                i += 1;
            }
            if i >= to {
                break;
            }
            let (start, mut end, mut j) = (i, i + 1, i + 1);
            while j < to && j < end + GAP {
                if before[j] != after[j] {
                    end = j + 1;
                }
                j += 1;
            }
            out.push((start, end));
            i = end;
        }
        out
    }

    /// Stretches found eight bytes at a time are those of the byte-at-a-time definition,
    /// over strings of every length up to a page and changes of every shape.
    #[test]
    fn word_stretches_match_the_byte_definition() {
        let mut rng = crate::testing::Rng::new(0x9E37_79B9_7F4A_7C15);
        for round in 0..3_000 {
            let len = match round % 3 {
                0 => rng.index(40),
                1 => rng.index(400),
                _ => 4096,
            };
            let before: Vec<u8> = (0..len).map(|i| (i * 31 + round) as u8).collect();
            let mut after = before.clone();
            scatter_changes(&mut rng, &mut after);
            let mut got = Vec::new();
            let mut i = 0;
            while let Some((start, end)) = next_difference(&before, &after, i) {
                got.push((start, end));
                i = end;
            }
            assert_eq!(got, reference(&before, &after), "round {round}, {len} bytes");
        }
    }
}
