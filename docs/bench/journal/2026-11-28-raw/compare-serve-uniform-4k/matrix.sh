#!/bin/bash
# 2026-11-28, release build at 7d3b03a (with the inner-node bias, 9d595c5).
cd /work/main
./target/release/ferrite bench compare serve --db /work/benchdata/cmp --out /work/benchdata/s-unif-4k --records 330000 --value-size 4096 --cache-mib 128 --seconds 15 --distribution uniform --rates 2500,5000,10000,20000
