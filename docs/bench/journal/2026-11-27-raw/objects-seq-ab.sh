#!/bin/bash
# Alternated pairs, ferrite then the file: 256 KiB sequential writes and reads, depth 32.
# (At e9d4798.)
F=/work/main/target/release/ferrite
for i in 1 2 3; do
  for pattern in seqwrite seqread; do
    for store in ferrite file; do
      rm -rf /work/benchdata/obj
      echo -n "$store $pattern: "
      timeout 300 $F bench objects --store $store --pattern $pattern --block 256k --objects 4 --object-mib 256 --depth 32 --seconds 10 --dir /work/benchdata/obj 2>&1 | grep "^result" | grep -o "mib_per_s=[0-9.]*\|p99_us=[0-9.]*\|cpu_us_per_op=[0-9.]*\|write_amp=[0-9.]*" | tr '\n' ' '
      echo
    done
  done
done
rm -rf /work/benchdata/obj
