#!/bin/bash
# Install rclone (Debian package, 1.60 on Debian 12) for the devserver fidelity
# suite tests/test_devserver_rclone.py.  Idempotent: apt runs only when rclone
# is missing.
#
# Usage: bash .ci/rclone-deps.sh
set -euo pipefail

command -v rclone >/dev/null 2>&1 && exit 0

export DEBIAN_FRONTEND=noninteractive
SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
log=$(mktemp)
if ! { $SUDO apt-get update -qq && \
       $SUDO apt-get install -y -qq --no-install-recommends rclone; } >"$log" 2>&1; then
  tail -n 30 "$log" >&2; rm -f "$log"
  echo "rclone-deps: FAILED: apt-get install rclone" >&2; exit 1
fi
rm -f "$log"
command -v rclone >/dev/null 2>&1 || { echo "rclone-deps: FAILED: rclone still missing" >&2; exit 1; }
echo "rclone-deps: $(rclone version 2>/dev/null | head -n 1)"
