#!/usr/bin/env bash
# Interleaved pairs: ferrite then file, three times each, 4 KiB random writes (and synced).
set -u
F=/work/main/target/release/ferrite
OUT=${OUT:-/work/benchruns/objects-ab.txt}
run() { echo "### $*" >> "$OUT"; timeout 600 $F bench objects "$@" --dir /work/benchdata/obj 2>&1 | grep -v "%" >> "$OUT"; }
common="--objects 4 --object-mib 256 --depth 32 --seconds 10"
for i in 1 2 3; do
  for store in ferrite file; do run --store $store --pattern randwrite --block 4k $common; done
done
for i in 1 2; do
  for store in ferrite file; do run --store $store --pattern randwrite --block 4k $common --sync; done
done
echo DONE >> "$OUT"
