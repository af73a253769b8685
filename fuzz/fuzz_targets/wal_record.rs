//! Fuzzes the write-ahead log's record decoder: any bytes must decode or be refused without
//! panicking, and a record that decodes must encode back to the same record. The body lives
//! in the library (`wal::record::fuzz_record`) so that unit tests run it on stable too.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ferrite::wal::record::fuzz_record(data));
