#!/usr/bin/env bash
# The one entry point for developers and CI: formatting, lints with warnings denied, and
# every test (the fuzz targets' decoders also run as ordinary tests over random inputs); the
# layer rule (scripts/check_layers.sh) and the file names in comments and docs
# (scripts/check_paths.sh).
#
# The peers of `ferrite bench` (RocksDB, WiredTiger, LMDB, SQLite; memcached for `bench serve`)
# are built and tested too when their Debian packages are installed (librocksdb-dev
# libwiredtiger-dev liblmdb-dev libsqlite3-dev memcached);
# FERRITE_REQUIRE_PEERS=1 (as CI sets it) makes their absence an error instead of a skip.
# Likewise the power-cut suite (crates/ferrite/tests/powercut.rs) needs root, loop devices and
# mkfs.ext4, and skips without them unless FERRITE_REQUIRE_POWERCUT=1 (as CI sets it).
# The server's client and proxy tests (crates/ferrite-server/tests/clients.rs, proxy.rs) use
# Debian's python3-pymemcache, python3-pylibmc, libmemcached-tools and nutcracker, and skip
# without them unless
# FERRITE_REQUIRE_CLIENTS=1 (as CI sets it).
set -euo pipefail
cd "$(dirname "$0")/.."

features=()
if [[ -f /usr/include/rocksdb/c.h && -f /usr/include/wiredtiger.h && -f /usr/include/lmdb.h &&
    -f /usr/include/sqlite3.h ]]; then
    features=(--features ferrite-cli/peers,ferrite-peers/link)
    echo "== peers' libraries found: building and testing RocksDB, WiredTiger, LMDB and SQLite too"
elif [[ "${FERRITE_REQUIRE_PEERS:-0}" == 1 ]]; then
    echo "error: FERRITE_REQUIRE_PEERS=1 but the peers' headers are missing" \
        "(apt-get install librocksdb-dev libwiredtiger-dev liblmdb-dev libsqlite3-dev)" >&2
    exit 1
else
    echo "== peers' libraries not installed: testing without them" \
        "(apt-get install librocksdb-dev libwiredtiger-dev liblmdb-dev libsqlite3-dev to include them)"
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== layers: lower layers never name higher ones" && scripts/check_layers.sh
echo "== paths: every file a comment or document names exists" && scripts/check_paths.sh
echo "== fuzz targets build (their own workspace; the bodies run as unit tests below)"
cargo check --quiet --manifest-path fuzz/Cargo.toml
echo "== cargo clippy (warnings denied)"
cargo clippy --workspace --all-targets "${features[@]}" -- -D warnings
echo "== cargo test"
cargo test --workspace "${features[@]}"
