#!/bin/bash
# 2026-11-28, release build of 65cae60.
B=${FERRITE:-/work/main/target/release/ferrite}
for store in ferrite-none ferrite-sync memcached; do
  case $store in
    ferrite-none) args="--store ferrite --durability none";;
    ferrite-sync) args="--store ferrite --durability sync";;
    memcached) args="--store memcached";;
  esac
  echo "=== $store"
  $B bench serve $args --db /work/benchdata/sets-$store --memory-mib 128 --keys 1300000 --value-size 1024 --distribution zipfian --mix 0:100 --seconds 15 2>&1 | grep -v "^  progress"
done
