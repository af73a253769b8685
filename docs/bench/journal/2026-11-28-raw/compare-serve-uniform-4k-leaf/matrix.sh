#!/bin/bash
# 2026-11-28, release build at 0979384 (the clock spares leaves over Value pages).
cd /work/main
./target/release/ferrite bench compare serve --db /work/benchdata/cmp --out /work/benchdata/s-unif-4k-leaf --records 330000 --value-size 4096 --cache-mib 128 --seconds 15 --distribution uniform --rates 2500,5000,10000,20000
