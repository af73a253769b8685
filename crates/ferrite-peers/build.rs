//! Without the `link` feature: nothing (no C compiled, nothing linked), so the workspace builds
//! on a machine without the peers' libraries. With it: compiles the WiredTiger shim, the
//! header-constant checks, RocksDB's cache tiers, its TransactionDB handle, its write buffer
//! manager and its tickers-only statistics (C++, `csrc/rocksdb_tier.cc`, `csrc/rocksdb_txn.cc`,
//! `csrc/rocksdb_memory.cc`, `csrc/rocksdb_stats.cc`) in `csrc/`,
//! and links the system RocksDB, WiredTiger, LMDB and SQLite.

fn main() {
    // Cargo sets CARGO_FEATURE_LINK for the build script when the feature is on, and compiles
    // the script with the same cfg; `cc` is a build-dependency only then. Without the feature
    // this prints nothing: no library to link, no C to compile.
    #[cfg(feature = "link")]
    if std::env::var_os("CARGO_FEATURE_LINK").is_some() {
        link();
    }
}

#[cfg(feature = "link")]
fn link() {
    println!("cargo:rerun-if-changed=build.rs");
    for file in [
        "csrc/wt_shim.c",
        "csrc/header_checks.c",
        "csrc/rocksdb_tier.cc",
        "csrc/rocksdb_txn.cc",
        "csrc/rocksdb_memory.cc",
        "csrc/rocksdb_stats.cc",
    ] {
        println!("cargo:rerun-if-changed={file}");
    }
    cc::Build::new()
        .file("csrc/wt_shim.c")
        .file("csrc/header_checks.c")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .compile("ferrite_peers_shim");
    // RocksDB's C++ API for what its C API lacks; C++17 as RocksDB 7.8's headers need. `cc`
    // also links the C++ runtime (libstdc++).
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .file("csrc/rocksdb_tier.cc")
        .file("csrc/rocksdb_txn.cc")
        .file("csrc/rocksdb_memory.cc")
        .file("csrc/rocksdb_stats.cc")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .compile("ferrite_peers_rocksdb_tier");
    // After the shims' static libraries, so their references to the engines resolve.
    for lib in ["rocksdb", "wiredtiger", "lmdb", "sqlite3"] {
        println!("cargo:rustc-link-lib={lib}");
    }
}
