#!/bin/bash
# 2026-11-28, release build at the commit that added --herd (bench serve); memcached's
# 100 KB run again once its load was paced by bytes (the commit after).
# Herds of 100 connections on one cold key a round: 1 KiB items (1.3 M, 10x the memory)
# and 100 KB items (13,000, 1.3 GB), Ferrite (durability none) and memcached + extstore.
B=${FERRITE:-/work/main/target/release/ferrite}
for size in 1024 100000; do
  keys=$(( size == 1024 ? 1300000 : 13000 ))
  for store in ferrite memcached; do
    extra=""; [ $store = ferrite ] && extra="--durability none"
    echo "=== $store, $size B"
    $B bench serve --store $store --db /work/benchdata/herd-$store --memory-mib 128 \
      --keys $keys --value-size $size --herd --connections 100 --seconds 10 $extra 2>&1 \
      | grep -v "^  progress"
  done
done
