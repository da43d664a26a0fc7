#!/usr/bin/env bash
# The README's install, tested: `pip install .` into a fresh virtual
# environment (what `pipx install .` does), then the installed `ohsync`
# command, with HOME and the XDG folders in a temporary directory.
#
# Usage: bash .ci/install-check.sh        (from anywhere; PYTHON=python3.12 to choose the interpreter)
#
# Quiet unless something fails; then it names the check and shows the output.
# To add a check: write a function check_NAME that uses `ohs` / `expect`, and
# add NAME to CHECKS below.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${PYTHON:-python3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ohsync-install.XXXXXX")
DEVSERVER_PID=
# stop the devserver a check started (also when a check fails), then remove everything
cleanup() {
  if [ -n "$DEVSERVER_PID" ]; then kill "$DEVSERVER_PID" 2>/dev/null || true; wait "$DEVSERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
OUT="$WORK/out"
VENV="$WORK/venv"

fail() {
  echo "install-check: FAILED: $*" >&2
  [ -s "$OUT" ] && tail -n 40 "$OUT" >&2
  exit 1
}

# quiet COMMAND...: run it, keeping its output in $OUT for `expect` and for failures
quiet() { "$@" >"$OUT" 2>&1 || fail "exit $?: $*"; }

# ohs ARGS...: the installed ohsync, expected to succeed; its output in $OUT
ohs() { quiet "$VENV/bin/ohsync" "$@"; }

# expect TEXT: the last command's output contains TEXT
expect() { grep -qF -- "$1" "$OUT" || fail "expected '$1' in the output of the last command"; }

# --- install: a copy of the source (a build writes into its tree), into a new venv
mkdir -p "$WORK/src" "$WORK/home" "$WORK/bin"
tar -C "$ROOT" --exclude=./.venv --exclude=./.git --exclude=./artifacts --exclude='*.egg-info' \
    --exclude=./build -cf - . | tar -C "$WORK/src" -xf -
quiet "$PYTHON" -m venv "$VENV"
PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONWARNINGS=ignore quiet "$VENV/bin/pip" install -q "$WORK/src"

# --- the environment of every check: a fresh home, no session, no real systemd
export HOME="$WORK/home" XDG_CONFIG_HOME="$WORK/home/.config" XDG_STATE_HOME="$WORK/home/.local/state"
export XDG_DATA_HOME="$WORK/home/.local/share" XDG_CACHE_HOME="$WORK/home/.cache"
unset DISPLAY WAYLAND_DISPLAY XDG_CURRENT_DESKTOP DBUS_SESSION_BUS_ADDRESS OHSYNC_CONFIG OHSYNC_SOCKET NOTIFY_SOCKET XDG_RUNTIME_DIR
# a systemctl that finds no user manager, so `autostart` can never touch this machine's login setup
printf '#!/bin/sh\necho "no user manager (install-check stand-in)" >&2\nexit 1\n' >"$WORK/bin/systemctl"
chmod +x "$WORK/bin/systemctl"
export PATH="$VENV/bin:$WORK/bin:$PATH"

check_on_path() {
  [ "$(command -v ohsync)" = "$VENV/bin/ohsync" ] || fail "ohsync is not the installed console script"
}

check_version() {
  local want
  want=$("$PYTHON" -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' \
         "$ROOT/pyproject.toml")
  ohs --version
  [ "$(cat "$OUT")" = "ohsync $want" ] || fail "ohsync --version printed '$(cat "$OUT")', not 'ohsync $want'"
}

check_help() {
  ohs --help
  for command in login run status autostart log setup doctor; do expect "$command"; done
}

check_autostart() {
  local entry="$XDG_CONFIG_HOME/autostart/ohsync.desktop"
  # a headless machine (no desktop session installed): nothing would start an entry, so enable
  # installs none, exits 1 and gives the command line to start from one's own init
  export XDG_DATA_DIRS="$WORK/share-headless"
  if "$VENV/bin/ohsync" autostart enable >"$OUT" 2>&1; then fail "autostart enable exited 0 on a headless machine"; fi
  expect "Autostart not set up"
  expect "@reboot $VENV/bin/ohsync run --no-tray"
  [ ! -e "$entry" ] || fail "autostart enable installed $entry on a headless machine"
  # where a display manager offers a desktop session, the entry is installed
  mkdir -p "$WORK/share-desktop/xsessions"
  printf '[Desktop Entry]\nName=Xfce\nExec=startxfce4\n' >"$WORK/share-desktop/xsessions/xfce.desktop"
  export XDG_DATA_DIRS="$WORK/share-desktop"
  ohs autostart enable
  expect "$entry"
  grep -qxF "Exec=$VENV/bin/ohsync run" "$entry" || fail "$entry does not run the installed ohsync"
  ohs autostart status
  expect "autostart: on"
  ohs autostart disable
  [ ! -e "$entry" ] || fail "autostart disable left $entry"
  ohs autostart status
  expect "autostart: off"
}

check_log() {
  # no daemon ran: a sentence naming the log's place, exit 1, no traceback
  if "$VENV/bin/ohsync" log >"$OUT" 2>&1; then fail "ohsync log succeeded without a log"; fi
  expect "$XDG_STATE_HOME/ohsync/logs/ohsync.log"
  if grep -q Traceback "$OUT"; then fail "ohsync log printed a traceback"; fi
}

check_setup() {
  # a devserver from the installed package on a free port of 127.0.0.1, and the test keyring (a file)
  "$VENV/bin/python" -m ohsync.devserver --host 127.0.0.1 --port 0 --data "$WORK/devserver" \
      --user you@example.org:pw >"$WORK/devserver.out" 2>&1 &
  DEVSERVER_PID=$!
  local url="" i
  for i in $(seq 150); do
    url=$(sed -n 's/^devserver ready at //p' "$WORK/devserver.out")
    [ -n "$url" ] && break
    kill -0 "$DEVSERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$url" ] || { cp "$WORK/devserver.out" "$OUT"; fail "devserver did not start"; }
  # the socket in a private runtime folder, as a desktop session has one: doctor must not
  # find a daemon that happens to run on this machine at the /tmp fallback
  mkdir -p -m 700 "$WORK/run"
  export XDG_RUNTIME_DIR="$WORK/run"
  export PYTHON_KEYRING_BACKEND=ohsync.daemon.file_keyring.FileKeyring OHSYNC_KEYRING_FILE="$WORK/keyring.json"
  ohs setup --yes --server "$url" --username you@example.org --password-stdin --create-library \
      --no-autostart <<<"pw"
  expect "ohsync is set up: 'OH-Memory' at $url"
  [ -d "$HOME/OH-Memory" ] && [ -d "$HOME/OH-Drop" ] || fail "setup did not create ~/OH-Memory and ~/OH-Drop"
  grep -qF "server = \"$url\"" "$XDG_CONFIG_HOME/ohsync/config.toml" || fail "setup wrote no config"
  [ -s "$OHSYNC_KEYRING_FILE" ] || fail "setup stored no token in the keyring"
}

check_doctor() {
  local check
  ohs doctor   # exit 0: warnings (no display, the file keyring, no daemon) only
  if grep -q '^ERROR' "$OUT"; then fail "ohsync doctor reported an error"; fi
  for check in config server login library "mirror folder" "drop folder"; do
    grep -qE "^ok +$check:" "$OUT" || fail "ohsync doctor: the $check check is not ok"
  done
  expect "ok       login: The server accepts the token of you@example.org."
  expect "ok       library: 'OH-Memory'"
  ohs doctor --json
  "$PYTHON" -c 'import json, sys; r = json.load(open(sys.argv[1])); sys.exit(0 if r["ok"] else 1)' "$OUT" \
      || fail "doctor --json did not report ok"
  kill "$DEVSERVER_PID" && wait "$DEVSERVER_PID" 2>/dev/null || true
  DEVSERVER_PID=
  if "$VENV/bin/ohsync" doctor >"$OUT" 2>&1; then fail "doctor exited 0 with the server gone"; fi
  expect "fix: Check the network connection"
}

CHECKS=(on_path version help autostart log setup doctor)
for name in "${CHECKS[@]}"; do
  "check_$name"
done
