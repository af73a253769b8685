//! Fuzzes the dump format's decoder (`ferrite load`'s input): any line must decode or be
//! refused without panicking, every entry that decodes must encode back to a line that
//! decodes to the same bytes, and any bytes must escape and unescape to themselves. The body
//! lives in the library (`ferrite::dump::fuzz_dump`) so that unit tests run it on stable.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ferrite::dump::fuzz_dump(data));
