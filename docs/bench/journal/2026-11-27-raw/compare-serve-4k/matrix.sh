#!/bin/bash
cd /work/main
F=./target/release/ferrite
$F bench compare serve --db /work/benchdata/cmp --out /work/benchdata/m-5050 --records 1300000 --cache-mib 128 --seconds 15 --distribution zipfian --mix 50:50 --rates 2500,5000,10000,20000
$F bench compare serve --db /work/benchdata/cmp --out /work/benchdata/m-4k --records 330000 --value-size 4096 --cache-mib 128 --seconds 15 --distribution zipfian --rates 2500,5000,10000,20000
