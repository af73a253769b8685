#!/bin/bash
# 2026-11-28, release build of b96c6b9 (engine as ee757a2). This one script made compare-serve-r3/ and compare-serve-uniform/; the third sweep (unif-4k) was stopped.
cd /work/main
F=./target/release/ferrite
for args in "zipf-1k-r3|--records 1300000 --distribution zipfian" "unif-1k|--records 1300000 --distribution uniform" "unif-4k|--records 330000 --value-size 4096 --distribution uniform"; do
  name=${args%%|*}; rest=${args#*|}
  rm -rf /work/benchdata/cmp
  echo "== $name $(date)"
  $F bench compare serve --db /work/benchdata/cmp --out /work/benchdata/s-$name --cache-mib 128 --seconds 15 $rest
done
rm -rf /work/benchdata/cmp
echo "== done $(date)"
