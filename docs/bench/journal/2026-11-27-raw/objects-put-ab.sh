#!/bin/bash
# Alternated pairs: be9fc34 (/tmp/base) against 33d4e37 (/tmp/cur), 4 KiB random writes.
for i in 1 2 3; do
  for B in /tmp/base/ferrite /tmp/cur/ferrite; do
    rm -rf /work/benchdata/obj
    echo -n "$B: "
    timeout 200 $B bench objects --store ferrite --pattern randwrite --block 4k --objects 4 --object-mib 256 --depth 32 --seconds 10 --dir /work/benchdata/obj 2>&1 | grep "^result" | grep -o "ops_per_s=[0-9]*\|p99_us=[0-9.]*\|cpu_us_per_op=[0-9.]*\|user_us_per_op=[0-9.]*\|write_amp=[0-9.]*\|space_amp=[0-9.]*" | tr '\n' ' '
    echo
  done
done
rm -rf /work/benchdata/obj
timeout 200 /tmp/cur/ferrite bench objects --store file --pattern randwrite --block 4k --objects 4 --object-mib 256 --depth 32 --seconds 10 --dir /work/benchdata/obj 2>&1 | grep "^result" | grep -o "store=[a-z]*\|ops_per_s=[0-9]*\|cpu_us_per_op=[0-9.]*" | tr '\n' ' '
rm -rf /work/benchdata/obj
