#!/bin/sh
# Starts BINARY as ranks 0 and 1 of a torchrun-style launch on PORT (the
# variables torchrun sets, no launcher) and exits with rank 0's status plus
# 10 times rank 1's, so that a test sees how both ended.
# Usage: torchrun_pair.sh PORT BINARY ARGS...
port=$1
shift
RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@" &
peer=$!
RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@"
rc0=$?
wait $peer
rc1=$?
exit $((rc0 + 10 * rc1))
