#!/bin/sh
# Starts BINARY as ranks 0 and 1 of a torchrun-style launch on PORT, as
# torchrun_pair.sh does, for a rank 1 that dies or hangs: rank 0 runs in the
# foreground (bounded by 120 s, so that a rank that never ends fails the
# test rather than hanging it); rank 1 is then given 5 s to end and killed
# if it has not (a stopped rank never does). Prints how each ended and
# exits with rank 0's status.
# Usage: torchrun_pair_fault.sh PORT BINARY ARGS...
port=$1
shift
RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@" &
peer=$!
RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
  timeout 120 "$@"
rc0=$?
echo "torchrun_pair_fault: rank 0 exited with status $rc0"
i=0
while kill -0 $peer 2>/dev/null && [ $i -lt 50 ]; do
  sleep 0.1
  i=$((i + 1))
done
if kill -0 $peer 2>/dev/null; then
  echo "torchrun_pair_fault: rank 1 was still there 5 s later: killed"
  kill -KILL $peer
fi
wait $peer
echo "torchrun_pair_fault: rank 1 exited with status $?"
exit $rc0
