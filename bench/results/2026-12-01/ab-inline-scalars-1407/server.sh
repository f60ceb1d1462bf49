#!/bin/bash
# A/B of the scaled server: base and new weft-bench-server (+ weft-server-e2e beside it), alternating;
# each sitting: embedded (0) then 1 instance, fresh database and Redis prefix per configuration.
out=/tmp/ab/server.jsonl
for round in "$@"; do
  if [ $((round % 2)) -eq 1 ]; then order="base new"; else order="new base"; fi
  for side in $order; do
    for inst in 0 1; do
      bin=/tmp/ab/$side
      if [ $inst = 0 ]; then
        $bin/weft-bench-server --weft-bin $bin/weft-server-e2e --only server_runs_per_s 2>/dev/null | grep '^{' | sed "s/^{/{\"side\":\"$side\",\"round\":$round,/" >> $out
      else
        db=weft_ab_$$_${side}_$round
        psql -q -h 127.0.0.1 -U postgres -d test -c "CREATE DATABASE $db" >/dev/null
        $bin/weft-bench-server --weft-bin $bin/weft-server-e2e --only server_runs_per_s --instances 1 --database-uri postgres://postgres@127.0.0.1:5432/$db --redis-uri redis://127.0.0.1:6379/ --redis-prefix "weft-ab-$db:" 2>/dev/null | grep '^{' | sed "s/^{/{\"side\":\"$side\",\"round\":$round,/" >> $out
        psql -q -h 127.0.0.1 -U postgres -d test -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
        redis-cli --scan --pattern "weft-ab-$db:*" | xargs -r redis-cli del >/dev/null
      fi
    done
  done
done
