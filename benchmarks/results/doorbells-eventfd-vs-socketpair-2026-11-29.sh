#!/bin/bash
# shm ping-pong, eventfd doorbells (148f744) against socket-pair doorbells (main), alternated, one run.
out=/tmp/bench-bell.txt; : > $out
for round in 1 2; do
  for b in base main; do
    d=/work/wt-base; [ $b = main ] && d=/work/main
    for spin in default 0; do
      env=""; [ $spin = 0 ] && env="RDMASOCK_SPIN_US=0"
      echo "== $b spin=$spin round $round" >> $out
      (cd $d && env $env build/pingpong --iters 20000 --warmup 2000 --modes tcp,shm 2>&1 | grep -E "^(mode|tcp|shm)" ) >> $out
    done
  done
done
