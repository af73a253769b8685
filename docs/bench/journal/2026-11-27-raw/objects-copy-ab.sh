#!/bin/bash
# Alternated pairs: e9d4798 (/tmp/e9) against whole blocks written from the caller's bytes
# (/tmp/cow), then the file: 256 KiB sequential and 4 KiB random writes.
for i in 1 2; do
  for pattern in "seqwrite --block 256k" "randwrite --block 4k"; do
    for B in /tmp/e9/ferrite /tmp/cow/ferrite; do
      rm -rf /work/benchdata/obj
      echo -n "$B $pattern: "
      timeout 300 $B bench objects --store ferrite --pattern $pattern --objects 4 --object-mib 256 --depth 32 --seconds 10 --dir /work/benchdata/obj 2>&1 | grep "^result" | grep -o "ops_per_s=[0-9]*\|mib_per_s=[0-9.]*\|p99_us=[0-9.]*\|cpu_us_per_op=[0-9.]*" | tr '\n' ' '
      echo
    done
    rm -rf /work/benchdata/obj
    echo -n "file $pattern: "
    timeout 300 /tmp/cow/ferrite bench objects --store file --pattern $pattern --objects 4 --object-mib 256 --depth 32 --seconds 10 --dir /work/benchdata/obj 2>&1 | grep "^result" | grep -o "ops_per_s=[0-9]*\|mib_per_s=[0-9.]*\|cpu_us_per_op=[0-9.]*" | tr '\n' ' '
    echo
  done
done
rm -rf /work/benchdata/obj
