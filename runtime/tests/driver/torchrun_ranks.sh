#!/bin/sh
# Starts BINARY as ranks 0 .. N-1 of a torchrun-style launch on PORT of
# 127.0.0.1 (the variables torchrun sets, no launcher), rank 0 in the
# foreground bounded by 120 s so that a job that never ends fails the test
# rather than hanging it. The other ranks are then given 5 s to end and
# killed if they have not (a stopped rank never does). Prints how each rank
# ended and exits with rank 0's status.
# Usage: torchrun_ranks.sh N PORT BINARY ARGS...
n=$1
port=$2
shift 2
pids=""
r=1
while [ $r -lt $n ]; do
  RANK=$r LOCAL_RANK=$r WORLD_SIZE=$n LOCAL_WORLD_SIZE=$n \
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@" &
  pids="$pids $!"
  r=$((r + 1))
done
RANK=0 LOCAL_RANK=0 WORLD_SIZE=$n LOCAL_WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 \
  MASTER_PORT=$port timeout 120 "$@"
rc0=$?
echo "torchrun_ranks: rank 0 exited with status $rc0"
i=0
while [ $i -lt 50 ]; do
  alive=0
  for p in $pids; do
    kill -0 $p 2>/dev/null && alive=1
  done
  [ $alive -eq 0 ] && break
  sleep 0.1
  i=$((i + 1))
done
r=1
for p in $pids; do
  if kill -0 $p 2>/dev/null; then
    echo "torchrun_ranks: rank $r was still there 5 s later: killed"
    kill -KILL $p
  fi
  wait $p
  echo "torchrun_ranks: rank $r exited with status $?"
  r=$((r + 1))
done
exit $rc0
