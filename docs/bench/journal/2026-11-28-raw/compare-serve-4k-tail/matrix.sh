#!/bin/bash
# 4 KiB items after values up to 4,560 bytes keep a tail in their leaf (85e5c4e).
cd /work/main
F=./target/release/ferrite
$F bench compare serve --db /work/benchdata/cmp --out /work/benchdata/m-4k-tail --records 330000 --value-size 4096 --cache-mib 128 --seconds 15 --distribution zipfian --rates 2500,5000,10000,20000
