//! The fuzz body for `fuzz/fuzz_targets/memcache_protocol.rs`, kept in the library so the
//! unit tests run it on stable: any bytes, decoded as a connection would decode them, never
//! panic, always make progress or ask for more within the limits, and decode the same
//! whether they arrive at once or in two pieces.

use super::decode::{decode, Decoded, Limits};

/// Small limits, so that the fuzzer reaches the "too large" and "line too long" paths.
const FUZZ_LIMITS: Limits = Limits { item_max_bytes: 64, multiget_line_max_bytes: 4096 };

/// Decodes `data` as one connection's input and checks the decoder's contract.
pub fn fuzz_protocol(data: &[u8]) {
    let whole = outcomes(data, data.len());
    // The same bytes arriving in two reads (split where the first byte says) decode alike.
    if let Some(&first) = data.first() {
        let split = usize::from(first) % (data.len() + 1);
        assert_eq!(outcomes(data, split), whole, "split at {split}");
    }
}

/// What a connection that has received `data[..available]`, then the rest, decodes: one
/// summary per step.
fn outcomes(data: &[u8], available: usize) -> Vec<String> {
    let limits = FUZZ_LIMITS;
    let mut steps = Vec::new();
    let mut start = 0;
    let mut available = available;
    while start < data.len() {
        let buf = &data[start..available.max(start)];
        let decoded = decode(buf, &limits);
        let advance = match &decoded {
            Decoded::NeedMore => {
                assert!(buf.len() < limits.buffer_max_bytes(), "asked for more past the bound");
                if available < data.len() {
                    available = data.len();
                    continue;
                }
                break;
            }
            Decoded::Request { consumed, .. } => {
                assert!(*consumed > 0 && *consumed <= buf.len());
                *consumed
            }
            Decoded::Error { skip, close, .. } => {
                assert!(*skip > 0);
                if *close {
                    steps.push(format!("{decoded:?}"));
                    break;
                }
                *skip
            }
        };
        steps.push(format!("{decoded:?}"));
        start += advance;
    }
    steps
}
