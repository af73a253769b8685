#!/bin/bash
# 4 KiB random writes at depth 32, alternated: Ferrite as tasks (the default), the file,
# RocksDB (chunk keys), Ferrite from threads (--direct-api); unsynced, then synced.
# Commit 26bb813, release build with --features peers.
B=${B:-target/release/ferrite}
run() {
  rm -rf /work/benchdata/obj
  echo -n "$*: "
  timeout 400 $B bench objects "$@" --pattern randwrite --block 4k --objects 4 --object-mib 256 \
    --depth 32 --seconds 20 --dir /work/benchdata/obj 2>&1 | grep "^result\|rror" |
    grep -o "ops_per_s=[0-9]*\|p99_us=[0-9.]*\|write_amp=[0-9.]*\|cpu_us_per_op=[0-9.]*\|.*rror.*" | tr '\n' ' '
  echo
}
for i in 1 2 3; do
  run --store ferrite
  run --store file
  run --store rocksdb
  run --store ferrite --direct-api
done
for i in 1 2; do
  run --store ferrite --sync
  run --store file --sync
  run --store rocksdb --sync
done
rm -rf /work/benchdata/obj
