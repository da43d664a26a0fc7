#!/usr/bin/env bash
# Lint and type-check the checkout: ruff over the tree, mypy over a link
# tree that names the top-level folders as the `ohsync` subpackages they are
# installed as (strict on ohsync.engine and ohsync.daemon.worker, see pyproject.toml).
#
# Usage: bash .ci/lint.sh VENV_DIR
set -euo pipefail
VENV=$(cd "${1:?usage: $0 VENV_DIR}" && pwd)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
"$VENV/bin/ruff" check --quiet .
tree=$(mktemp -d "${TMPDIR:-/tmp}/ohsync-mypy.XXXXXX")
trap 'rm -rf "$tree"' EXIT
mkdir "$tree/ohsync"
for d in engine daemon tray devserver; do ln -s "$ROOT/$d" "$tree/ohsync/$d"; done
(cd "$tree" && "$VENV/bin/mypy" --config-file "$ROOT/pyproject.toml" --cache-dir "$tree/.mypy_cache" \
    --no-error-summary -p ohsync.engine -p ohsync.daemon.worker)
echo "lint: ok"
