#!/bin/bash
# A/B: base (67bee86) and new (inline scalars) weft-bench binaries, alternating, each workload in its own process.
out=/tmp/ab/loops.jsonl
: > $out
for round in 1 2 3; do
  if [ $((round % 2)) -eq 1 ]; then order="base new"; else order="new base"; fi
  for w in loop1000_postgres loop1000_sqlite loop1000_sqlite_normal; do
    for side in $order; do
      line=$(/tmp/ab/$side/weft-bench --only $w 2>/dev/null | grep '^{' | tail -1)
      echo "{\"side\":\"$side\",\"round\":$round,\"load\":\"$(cut -d' ' -f1 /proc/loadavg)\",\"line\":$line}" >> $out
    done
  done
done
