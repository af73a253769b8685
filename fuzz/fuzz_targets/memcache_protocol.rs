//! Fuzzes the memcached protocol decoder: any bytes decode as a connection would decode
//! them without panicking, always making progress or asking for more within the limits,
//! alike whether they arrive at once or in two reads. The body lives in the library
//! (`ferrite_server::fuzz_protocol`) so that unit tests run it on stable too.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ferrite_server::fuzz_protocol(data));
