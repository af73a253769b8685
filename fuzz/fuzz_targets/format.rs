//! Fuzzes the superblock, free-list and value-page decoders: any page image must decode or be
//! refused without panicking, and whatever decodes must round-trip. The body lives in the
//! library (`ferrite::format::fuzz_format_page`) so that unit tests run it on stable too.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ferrite::format::fuzz_format_page(data));
