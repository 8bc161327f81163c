#!/usr/bin/env bash
# Regenerates what docs/ shows from the current code (the dialect and pass
# references, the cost-report figure, the demo's logs, the trace figure), or
# with --check, changes nothing and fails naming what drifted; ctest runs
# the checks. See scripts/refresh_docs.py for what each part is.
#   scripts/refresh-docs.sh [--check] [--all] [--only PART] [BUILD]
set -euo pipefail
cd "$(dirname "$0")/.."
exec /usr/bin/python3 scripts/refresh_docs.py "$@"
