"""The tray without a compiler: ohsync with the ``[tray-system]`` extra, installed the README's way
into a fresh virtual environment of the distribution's Python (``/usr/bin/python3 -m venv
--system-site-packages``, what ``pipx install --python /usr/bin/python3 --system-site-packages``
makes), loads the distribution's prebuilt GObject bindings (``python3-gi``) and pystray.

pip runs with ``--only-binary :all:`` (no source distribution may be built) and with stand-ins for
the C compilers and pkg-config first on PATH that record any call, so the -dev packages a source
build of PyGObject needs cannot be used even where they are installed; the only wheel built is
ohsync's own (pure Python, from this source folder).  The dependencies come from the configured
package index, as for ``make test``'s own virtual environment.

Skips, naming what to install, where ``/usr/bin/python3``, its ``venv`` module or ``python3-gi``
with GTK 3's typelib is missing (``.ci/desktop-deps.sh`` installs them).  The install time is
written to ``artifacts/install-tray-system.txt``; the bound asserted is only one no source build
of PyGObject stays under.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ohsync.tray.install_hint import SYSTEM_PYTHON, probe_system_python

REPO = Path(__file__).resolve().parent.parent
# what a build of PyGObject or pycairo would call
COMPILERS = ("cc", "gcc", "c++", "g++", "clang", "clang++", "x86_64-linux-gnu-gcc", "x86_64-linux-gnu-g++",
             "aarch64-linux-gnu-gcc", "pkg-config", "meson", "ninja")
# generous: a source build of PyGObject alone took over two minutes; this install takes well under one
NO_COMPILE_BOUND_S = 300.0
SOURCE_IGNORE = shutil.ignore_patterns(".venv", ".git", "artifacts", "build", "dist", "*.egg-info", ".pytest_cache",
                                       ".hypothesis", "__pycache__", "out")

pytestmark = [pytest.mark.timeout(900),
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the distribution's bindings: Linux")]


@pytest.fixture(scope="module")
def system_python() -> str:
    """``/usr/bin/python3`` when it can make venvs and load ``gi`` with GTK 3, else a skip saying what is missing."""
    found = probe_system_python(SYSTEM_PYTHON)
    if found is None:
        pytest.skip(f"{SYSTEM_PYTHON} is missing (Debian/Ubuntu: sudo apt install python3)")
    if not found.usable:
        pytest.skip(f"{SYSTEM_PYTHON} is Python {found.version[0]}.{found.version[1]}; ohsync needs 3.11 or newer")
    if "gi" in found.missing or "Gtk" in found.missing:
        pytest.skip(f"{SYSTEM_PYTHON} cannot load gi with GTK 3 (python3-gi missing: "
                    "sudo apt install python3-gi gir1.2-gtk-3.0)")
    venv_ok = subprocess.run([SYSTEM_PYTHON, "-c", "import ensurepip, venv"], capture_output=True, timeout=60)
    if venv_ok.returncode != 0:
        pytest.skip(f"{SYSTEM_PYTHON} cannot make a venv (sudo apt install python3-venv)")
    return SYSTEM_PYTHON


def _compiler_stand_ins(folder: Path, record: Path) -> Path:
    """A folder of scripts named like the compilers that append their call to ``record`` and fail."""
    folder.mkdir()
    for name in COMPILERS:
        script = folder / name
        script.write_text(f'#!/bin/sh\necho "{name} $*" >> "{record}"\nexit 1\n')
        script.chmod(0o755)
    return folder


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_USER", "PYTHONSTARTUP"}}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONWARNINGS="ignore", **extra)
    return env


@pytest.fixture
def display(tmp_path: Path) -> Iterator[str]:
    """A virtual X display (Xvfb on a free number): pystray's GTK backends initialise GTK at import."""
    if shutil.which("Xvfb") is None:
        pytest.fail("Xvfb is missing: run `bash .ci/desktop-deps.sh .venv` (docs/desktop-testing.md)")
    read_end, write_end = os.pipe()
    with open(tmp_path / "xvfb.log", "wb") as log:
        proc = subprocess.Popen(["Xvfb", "-displayfd", str(write_end), "-screen", "0", "320x240x24",
                                 "-nolisten", "tcp"],
                                pass_fds=(write_end,), stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    os.close(write_end)
    try:
        number = b""
        deadline = time.monotonic() + 30
        while not number.endswith(b"\n") and time.monotonic() < deadline and proc.poll() is None:
            if select.select([read_end], [], [], 0.5)[0]:
                chunk = os.read(read_end, 64)
                if not chunk:
                    break
                number += chunk
        assert number.strip(), f"Xvfb gave no display number: {(tmp_path / 'xvfb.log').read_text(errors='replace')}"
        yield f":{number.decode().strip()}"
    finally:
        os.close(read_end)
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def test_tray_system_installs_without_a_compiler(system_python: str, display: str, tmp_path: Path,
                                                 record_property) -> None:
    src = tmp_path / "src"
    shutil.copytree(REPO, src, ignore=SOURCE_IGNORE)  # a build writes into its source tree
    called = tmp_path / "compiler-called"
    stand_ins = _compiler_stand_ins(tmp_path / "no-compiler", called)
    venv = tmp_path / "venv"
    subprocess.run([system_python, "-m", "venv", "--system-site-packages", str(venv)], check=True,
                   capture_output=True, timeout=300, env=_clean_env())

    env = _clean_env(PATH=f"{stand_ins}{os.pathsep}{os.environ.get('PATH', '')}", CC=str(stand_ins / "cc"),
                     CXX=str(stand_ins / "c++"), PKG_CONFIG=str(stand_ins / "pkg-config"))
    started = time.monotonic()
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--only-binary", ":all:",
                           f"{src}[tray-system]"], capture_output=True, text=True, timeout=840, env=env)
    seconds = time.monotonic() - started
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"pip install failed:\n{output[-4000:]}"

    assert not called.exists(), f"a compiler or pkg-config was called:\n{called.read_text()}"
    built = set(re.findall(r"Building wheel for (\S+)", output))
    assert built == {"ohsync"}, f"pip built wheels for {sorted(built)}, expected ohsync's only"
    local = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--local", "--format=freeze"],
                           capture_output=True, text=True, timeout=120, env=_clean_env())
    installed = {line.split("==")[0].lower() for line in local.stdout.split()}
    assert "pygobject" not in installed and {"pystray", "pillow", "ohsync"} <= installed, local.stdout

    home = tmp_path / "home"
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    desktop_env = _clean_env(DISPLAY=display, NO_AT_BRIDGE="1", HOME=str(home), XDG_RUNTIME_DIR=str(runtime),
                             XDG_CACHE_HOME=str(home / ".cache"), XDG_CONFIG_HOME=str(home / ".config"),
                             XDG_DATA_HOME=str(home / ".local/share"))
    for name in ("WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "PYSTRAY_BACKEND"):
        desktop_env.pop(name, None)
    probe = ("import gi, sys\n"
             "gi.require_version('Gtk', '3.0')\n"
             "from gi.repository import Gtk\n"
             "from ohsync.tray.desktop import load_pystray\n"
             "from ohsync.daemon.doctor_local import tray_libraries_problem\n"
             "pystray = load_pystray()\n"
             "print(gi.__file__)\n"
             "print(pystray.Icon.__module__)\n"
             "print(tray_libraries_problem())\n")
    ran = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, timeout=120,
                         env=desktop_env)
    assert ran.returncode == 0, f"the installed tray does not load:\n{ran.stdout}{ran.stderr}"
    gi_file, backend, problem = ran.stdout.split("\n")[:3]
    assert not Path(gi_file).resolve().is_relative_to(venv.resolve()), f"gi came from the venv: {gi_file}"
    assert backend in {"pystray._appindicator", "pystray._gtk"} and problem == "None", ran.stdout
    version = subprocess.run([str(venv / "bin" / "ohsync"), "--version"], capture_output=True, text=True,
                             timeout=120, env=desktop_env)
    assert version.returncode == 0 and version.stdout.startswith("ohsync "), version.stderr

    record_property("install_seconds", round(seconds, 1))
    report = (f"pip install --only-binary :all: '.[tray-system]' into a venv of {system_python} "
              f"--system-site-packages: {seconds:.1f} s, wheels built: ohsync only, no compiler called; "
              f"gi from {gi_file}, pystray backend {backend}\n")
    artifacts = REPO / "artifacts"
    artifacts.mkdir(exist_ok=True)
    (artifacts / "install-tray-system.txt").write_text(report, encoding="utf-8")
    print(report, end="")
    assert seconds < NO_COMPILE_BOUND_S, f"the install took {seconds:.0f} s: {report}"
