#!/bin/bash
# First figures of `ferrite bench serve`: 1.3 M items of 1 KiB (1.27 GiB, ~10x the 128 MiB
# memory), 90:10 GET:SET, uniform keys, 32 connections, closed loop, 20 s; alternated:
# Ferrite with durability sync, Ferrite with none, memcached 1.6.18 + extstore.
B=${B:-target/release/ferrite}
run() {
  echo -n "$*: "
  $B bench serve "$@" --db /work/benchdata/serve --memory-mib 128 --keys 1.3M \
    --value-size 1024 --connections 32 --seconds 20 2>&1 | grep "^result\|rror" |
    grep -o "store=[a-z]*\|ops_per_s=[0-9]*\|p50_us=[0-9.]*\|p99_us=[0-9.]*\|hit_ratio=[0-9.]*\|durability=[a-z]*\|load_s=[0-9.]*\|client_cpu_us_per_op=[0-9.]*\|.*rror.*" | tr '\n' ' '
  echo
}
for i in 1 2; do
  run --store ferrite
  run --store ferrite --durability none
  run --store memcached
done
