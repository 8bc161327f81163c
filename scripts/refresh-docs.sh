#!/usr/bin/env bash
# Publishes the dialect and pass references that mlir-tblgen generates from
# the .td files (add_mlir_doc, built into BUILD/docs by the build) under
# docs/reference/. With --check, changes nothing and fails, with the diff,
# when the published copy is not what the .td files say (ctest runs it).
#   scripts/refresh-docs.sh [--check] [BUILD]   (BUILD defaults to build/)
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
if [ "${1:-}" = "--check" ]; then
  check=1
  shift
fi
build="${1:-build}"
docs=(Dialects/TrainOps.md TrainPasses.md ConversionPasses.md PipelinesPasses.md)
status=0
for doc in "${docs[@]}"; do
  generated="$build/docs/$doc"
  published="docs/reference/$(basename "$doc")"
  if [ ! -f "$generated" ]; then
    echo "refresh-docs: $generated is missing; build the 'mlir-doc' target first" >&2
    exit 2
  fi
  if ((check)); then
    if ! diff -u "$published" "$generated"; then
      echo "refresh-docs: $published is not what the .td files generate;" \
        "run scripts/refresh-docs.sh to publish it" >&2
      status=1
    fi
  else
    cp "$generated" "$published"
  fi
done
exit $status
