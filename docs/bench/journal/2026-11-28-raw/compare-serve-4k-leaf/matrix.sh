#!/bin/bash
# 2026-11-28, release build at 9e3293c (leaves kept over Value pages since 0979384).
cd /work/main
./target/release/ferrite bench compare serve --db /work/benchdata/cmp --out /work/benchdata/s-4k-leaf --records 330000 --value-size 4096 --cache-mib 128 --seconds 15 --distribution zipfian --rates 2500,5000,10000,20000
