#!/usr/bin/env bash
# The objects suite, second run of 2026-11-27 (virtio disk, ext4 on /work).
set -u
F=/work/main/target/release/ferrite
OUT=${OUT:-/work/benchruns/objects2.txt}
run() { echo "### $*" >> "$OUT"; timeout 600 $F bench objects "$@" --dir /work/benchdata/obj 2>&1 | grep -v "%" >> "$OUT"; }
common="--objects 4 --object-mib 256 --depth 32 --seconds 10"
for store in ferrite file rocksdb rocksdb-blob; do
  run --store $store --pattern randwrite --block 4k $common
  run --store $store --pattern randwrite --block 4k $common --sync
  run --store $store --pattern randwrite --block 2k $common
done
for store in ferrite file rocksdb; do
  run --store $store --pattern randread --block 4k $common
  run --store $store --pattern seqwrite --block 256k $common
  run --store $store --pattern seqread --block 256k $common
done
run --store sqlite --pattern randwrite --block 4k $common
run --store sqlite --pattern randwrite --block 4k $common --sync
# Space after passes: 4 GiB written over twice by 4 KiB random writes.
run --store ferrite --pattern randwrite --block 4k --objects 4 --object-mib 1024 --depth 32 --seconds 90
echo DONE >> "$OUT"
