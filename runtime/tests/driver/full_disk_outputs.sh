#!/bin/sh
# Runs BINARY once per output a run writes at its end (--save-params,
# --stats-json, --trace), each time with that output already holding an
# older file and with writes limited to BLOCKS 512-byte blocks (ulimit -f,
# SIGXFSZ ignored: a write past the limit fails with EFBIG, as one on a
# full disk fails with ENOSPC). Prints, per output, the run's error and
# what became of the files. The run is a torchrun-style world of one, not
# a singleton MPI job, whose start would itself fail under the limit.
# Usage: full_disk_outputs.sh DIR BLOCKS BINARY ARGS...
dir=$1
blocks=$2
shift 2
mkdir -p "$dir"
for option in --save-params --stats-json --trace; do
  file=$dir/output$option
  echo "an older run's file" > "$file"
  rm -f "$file.tmp"
  RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29581 \
    sh -c "ulimit -f $blocks; trap '' XFSZ; exec \"\$@\"" sh \
    "$@" "$option" "$file" > "$dir/log" 2>&1
  status=$?
  grep '^error' "$dir/log"
  if [ "$(cat "$file")" = "an older run's file" ]; then kept=kept; else kept=changed; fi
  if [ -e "$file.tmp" ]; then temp="a temporary is left"; else temp="no temporary"; fi
  echo "full_disk_outputs: $option: status $status, the older file $kept, $temp"
done
