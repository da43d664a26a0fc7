#!/bin/bash
# Install what the tray's real-display test (tests/test_tray_display.py) needs.
#
# Usage: bash .ci/desktop-deps.sh VENV_DIR
#
# Idempotent and quiet: apt runs only when a package is missing, pip only
# prints on failure. Exits non-zero (with the failing step named) on error.
# Recipes and versions: docs/desktop-testing.md (Debian 12).
set -euo pipefail

VENV=${1:?usage: $0 VENV_DIR}
PY="$VENV/bin/python"
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ -x "$PY" ] || { echo "desktop-deps: no python at $PY" >&2; exit 1; }

fail() { echo "desktop-deps: FAILED: $*" >&2; exit 1; }

# --- system packages (Debian) -------------------------------------------------
export DEBIAN_FRONTEND=noninteractive
# xauth: only a Recommends of xvfb. dunst: a notification service on the bus
# (pystray's icon.stop() fails without one). gtk-sni-tray-standalone: the
# StatusNotifier host + watcher for the appindicator backend; trayer: the
# XEmbed host for the gtk backend. chromium + chromium-driver: the headless
# browser the local page's tests (tests/test_panel_browser.py) drive;
# fonts-wqy-microhei: CJK glyphs for their screenshots of Chinese file names.
PKGS=(xvfb xauth x11-utils xdotool imagemagick dbus
      trayer gir1.2-gtk-3.0 libcairo2-dev pkg-config gcc
      gir1.2-ayatanaappindicator3-0.1 haskell-gtk-sni-tray-utils dunst
      chromium chromium-driver fonts-wqy-microhei)
# python3-gi, python3-venv: the tray with Debian's prebuilt GObject bindings, installed into a fresh
# venv of /usr/bin/python3 with --system-site-packages (tests/test_install_tray_system.py)
PKGS+=(python3-gi python3-venv)
command -v busctl >/dev/null 2>&1 || PKGS+=(systemd)

# Debian 12 has only girepository 1.0 (PyGObject must stay <3.52); Debian 13
# has girepository 2.0 and current PyGObject (untested path, see the recipes).
GIR_DEV=libgirepository1.0-dev
PYGOBJECT_OVERRIDE=
if [ "$(cut -d. -f1 /etc/debian_version 2>/dev/null || echo 12)" -ge 13 ] 2>/dev/null; then
  GIR_DEV=libgirepository-2.0-dev
  PYGOBJECT_OVERRIDE=PyGObject
fi
PKGS+=("$GIR_DEV")

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null || fail "apt-get not found; install by hand: ${missing[*]}"
  SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  echo "desktop-deps: apt-get install ${missing[*]}"
  log=$(mktemp)
  if ! { $SUDO apt-get update -qq && \
         $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
    tail -n 30 "$log" >&2; rm -f "$log"; fail "apt-get install ${missing[*]}"
  fi
  rm -f "$log"
fi

# --- Python: the `tray` extra of pyproject.toml, into the given venv ----------
mapfile -t REQS < <("$PY" - "$ROOT/pyproject.toml" "$PYGOBJECT_OVERRIDE" <<'PY'
import sys, tomllib
reqs = tomllib.load(open(sys.argv[1], "rb"))["project"]["optional-dependencies"]["tray"]
override = sys.argv[2]
for r in reqs:
    print(override if override and r.lower().startswith("pygobject") else r)
PY
)
if ! "$PY" - "${REQS[@]}" >/dev/null 2>&1 <<'PY'
# exit 0 only when every requirement is already satisfied (skips pip entirely)
import sys
from importlib.metadata import version, PackageNotFoundError
from packaging.requirements import Requirement
for r in map(Requirement, sys.argv[1:]):
    try:
        if not r.specifier.contains(version(r.name), prereleases=True):
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
PY
then
  echo "desktop-deps: pip install ${REQS[*]}"
  log=$(mktemp)
  if ! "$PY" -m pip install -q --disable-pip-version-check "${REQS[@]}" >"$log" 2>&1; then
    tail -n 40 "$log" >&2; rm -f "$log"; fail "pip install ${REQS[*]} into $VENV"
  fi
  rm -f "$log"
fi

# --- smoke check: everything the display test looks for ----------------------
for prog in Xvfb xdotool import compare dbus-daemon gtk-sni-tray-standalone trayer dunst busctl chromium chromedriver; do
  command -v "$prog" >/dev/null || fail "program $prog still missing"
done
"$PY" -c 'import gi; gi.require_version("Gtk", "3.0"); gi.require_version("AyatanaAppIndicator3", "0.1"); from gi.repository import Gtk, AyatanaAppIndicator3; import PIL, jeepney' \
  || fail "PyGObject / Gtk / AyatanaAppIndicator3 typelib / Pillow / jeepney not importable from $PY"
/usr/bin/python3 -c 'import gi, ensurepip; gi.require_version("Gtk", "3.0"); gi.require_version("AyatanaAppIndicator3", "0.1")' \
  || fail "Debian's python3-gi / python3-venv not usable from /usr/bin/python3"
echo "desktop-deps: ok"
