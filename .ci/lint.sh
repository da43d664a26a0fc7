#!/usr/bin/env bash
# Lint and type-check the checkout: ruff over the tree, mypy over a link
# tree that names the top-level folders as the `ohsync` subpackages they are
# installed as. engine, daemon and tray are strict and must have no error;
# devserver is checked with a looser override (see pyproject.toml) and its
# error count, kept in .ci/devserver_mypy_errors, may only go down.
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
rc=0
(cd "$tree" && "$VENV/bin/mypy" --config-file "$ROOT/pyproject.toml" --cache-dir "$tree/.mypy_cache" \
    --no-error-summary -p ohsync.engine -p ohsync.daemon -p ohsync.tray -p ohsync.devserver) \
    >"$tree/mypy.out" 2>&1 || rc=$?
if [ "$rc" -gt 1 ]; then  # 1: errors were found; anything higher: mypy itself failed
    cat "$tree/mypy.out"
    echo "lint: mypy failed (exit code $rc)" >&2
    exit 1
fi
strict_errors=$(awk '/: error:/ && !/^ohsync\/devserver\// {n++} END {print n+0}' "$tree/mypy.out")
if [ "$strict_errors" -gt 0 ]; then
    grep -v '^ohsync/devserver/' "$tree/mypy.out"
    echo "lint: mypy (strict) found errors in engine/, daemon/ or tray/" >&2
    exit 1
fi
allowed=$(tr -dc '0-9' <.ci/devserver_mypy_errors)
found=$(grep -c '^ohsync/devserver/.*: error:' "$tree/mypy.out" || true)
if [ "$rc" -ne 0 ] && [ "$found" -eq 0 ]; then  # mypy failed on something that names no module
    cat "$tree/mypy.out"
    echo "lint: mypy failed" >&2
    exit 1
fi
if [ "$found" -gt "$allowed" ]; then
    grep '^ohsync/devserver/' "$tree/mypy.out"
    echo "lint: mypy finds $found errors in devserver/, more than the $allowed in .ci/devserver_mypy_errors;" \
         "fix the new ones (listed above)" >&2
    exit 1
fi
if [ "$found" -lt "$allowed" ]; then
    echo "lint: mypy finds $found errors in devserver/, fewer than the $allowed in .ci/devserver_mypy_errors;" \
         "write $found there so the count cannot grow back" >&2
    exit 1
fi
echo "lint: ok"
