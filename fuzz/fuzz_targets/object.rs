//! Fuzzes the objects tree's decoders (stubs, keys, extents, fragments): any bytes decode
//! or are refused without panicking, and whatever decodes round-trips. The body lives in the
//! library (`ferrite::fuzz_object_entry`) so that unit tests run it on stable too.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ferrite::fuzz_object_entry(data));
