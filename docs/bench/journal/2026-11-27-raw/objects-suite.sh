#!/usr/bin/env bash
# The objects suite of 2026-11-27 (virtio disk, ext4 on /work).
set -u
F=/work/main/target/release/ferrite
OUT=/work/benchruns/objects-$(date +%H%M).txt
run() { echo "### $*" >> "$OUT"; timeout 600 $F bench objects "$@" --dir /work/benchdata/obj 2>&1 | grep -v "%" >> "$OUT"; }
for store in ferrite file rocksdb; do
  run --store $store --pattern randwrite --block 4k --objects 4 --object-mib 256 --depth 32 --seconds 10
  run --store $store --pattern randwrite --block 4k --objects 4 --object-mib 256 --depth 32 --seconds 10 --sync
  run --store $store --pattern randwrite --block 2k --objects 4 --object-mib 256 --depth 32 --seconds 10
  run --store $store --pattern randread --block 4k --objects 4 --object-mib 256 --depth 32 --seconds 10
  run --store $store --pattern seqwrite --block 256k --objects 4 --object-mib 256 --depth 32 --seconds 10
  run --store $store --pattern seqread --block 256k --objects 4 --object-mib 256 --depth 32 --seconds 10
done
run --store sqlite --pattern randwrite --block 4k --objects 4 --object-mib 256 --depth 32 --seconds 10
run --store sqlite --pattern randwrite --block 4k --objects 4 --object-mib 256 --depth 32 --seconds 10 --sync
# Space after passes: 4 GiB written over twice by 4 KiB random writes.
run --store ferrite --pattern randwrite --block 4k --objects 4 --object-mib 1024 --depth 32 --seconds 90
echo DONE >> "$OUT"
