"""Which command installs the tray's libraries on this machine.

The tray needs pystray, Pillow and, on Linux, the GObject bindings (PyGObject)
with the GTK 3 and AyatanaAppIndicator typelibs.  There are two ways to get
PyGObject (README, "The tray icon"):

* **the distribution's prebuilt bindings** (``python3-gi`` on Debian/Ubuntu,
  ``python3-gobject`` on Fedora) and the ``[tray-system]`` extra, in a
  virtual environment made by the distribution's own Python with its
  site-packages visible: ``pipx install --python /usr/bin/python3
  --system-site-packages '.[tray-system]'``.  Nothing is compiled.  The
  bindings are built for that one interpreter, so a venv made by another
  Python (pyenv, a python.org build) cannot use them;
* **PyGObject built from source** by pip (the ``[tray]`` extra), which needs
  a compiler and the GObject introspection and cairo ``-dev`` packages.

:func:`install_hint` names the first way where the distribution's Python can
use it, else the second.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SYSTEM_PYTHON", "SYSTEM_PACKAGES", "BUILD_PACKAGES", "SystemPython", "Machine", "distribution_family",
           "probe_system_python", "probe_machine", "system_install_command", "install_hint"]

#: the distribution's own interpreter, the one its GObject bindings are built for
SYSTEM_PYTHON = "/usr/bin/python3"
#: the oldest Python ohsync runs on (pyproject's requires-python)
MIN_PYTHON = (3, 11)

#: per distribution family: the installer and the package of each piece the tray loads
#: (``gi``: the bindings, ``Gtk``: GTK 3's typelib, ``AyatanaAppIndicator3``: the menu's typelib)
SYSTEM_PACKAGES: dict[str, tuple[str, dict[str, str]]] = {
    "debian": ("sudo apt install", {"gi": "python3-gi", "Gtk": "gir1.2-gtk-3.0",
                                    "AyatanaAppIndicator3": "gir1.2-ayatanaappindicator3-0.1"}),
    "fedora": ("sudo dnf install", {"gi": "python3-gobject", "Gtk": "gtk3",
                                    "AyatanaAppIndicator3": "libayatana-appindicator-gtk3"}),
}
#: per distribution family: what pip's source build of PyGObject needs (the ``[tray]`` extra)
BUILD_PACKAGES: dict[str, str] = {
    "debian": "sudo apt install libgirepository1.0-dev libcairo2-dev pkg-config gcc python3-dev gir1.2-gtk-3.0 "
              "gir1.2-ayatanaappindicator3-0.1",
    "fedora": "sudo dnf install gobject-introspection-devel cairo-gobject-devel pkg-config gcc python3-devel gtk3 "
              "libayatana-appindicator-gtk3",
}

# run by the distribution's Python: its version and which of the tray's pieces it cannot load
_PROBE = """\
import json, sys
missing = []
try:
    import gi
except ImportError:
    missing = ["gi", "Gtk", "AyatanaAppIndicator3"]
else:
    for namespace, version in (("Gtk", "3.0"), ("AyatanaAppIndicator3", "0.1")):
        try:
            gi.require_version(namespace, version)
        except ValueError:
            missing.append(namespace)
print(json.dumps({"version": list(sys.version_info[:2]), "missing": missing}))
"""


@dataclass(frozen=True)
class SystemPython:
    """What the distribution's Python can load.

    :ivar path: the interpreter (``/usr/bin/python3``).
    :ivar version: its ``(major, minor)``.
    :ivar missing: the tray pieces it cannot load: ``gi``, ``Gtk``, ``AyatanaAppIndicator3``.
    """

    path: str
    version: tuple[int, int]
    missing: tuple[str, ...] = ()

    @property
    def usable(self) -> bool:
        """True when ohsync can run on it (requires-python)."""
        return self.version >= MIN_PYTHON


@dataclass(frozen=True)
class Machine:
    """What the install hint depends on.

    :ivar platform: ``sys.platform``.
    :ivar family: ``debian``, ``fedora`` or None (another or unknown distribution).
    :ivar system_python: the distribution's Python, None when there is none.
    """

    platform: str
    family: str | None = None
    system_python: SystemPython | None = field(default=None)


def distribution_family(os_release: Mapping[str, str]) -> str | None:
    """``debian`` (Debian, Ubuntu, Mint…), ``fedora`` (Fedora, RHEL, CentOS…) or None.

    :param os_release: the fields of ``/etc/os-release`` (``ID``, ``ID_LIKE``).
    """
    ids = {os_release.get("ID", "").strip('"').lower(), *os_release.get("ID_LIKE", "").strip('"').lower().split()}
    if ids & {"debian", "ubuntu"}:
        return "debian"
    if ids & {"fedora", "rhel", "centos"}:
        return "fedora"
    return None


def _read_os_release(path: Path = Path("/etc/os-release")) -> dict[str, str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))


def probe_system_python(path: str = SYSTEM_PYTHON, timeout: float = 15.0) -> SystemPython | None:
    """Ask the distribution's Python what of the tray it can load (a short subprocess).

    :returns: None when ``path`` is missing or does not answer within ``timeout`` seconds.
    """
    if not Path(path).is_file():
        return None
    try:
        done = subprocess.run([path, "-I", "-c", _PROBE], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
        answer = json.loads(done.stdout)
        major, minor = answer["version"]
        return SystemPython(path, (int(major), int(minor)), tuple(answer["missing"]))
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, TypeError):
        return None


def probe_machine() -> Machine:
    """This machine: its platform, distribution family and system Python (probed on Linux only)."""
    if not sys.platform.startswith("linux"):
        return Machine(sys.platform)
    return Machine(sys.platform, distribution_family(_read_os_release()), probe_system_python())


def system_install_command(python: str = SYSTEM_PYTHON) -> str:
    """The pipx command of the prebuilt-bindings way, run in the ohsync source folder."""
    return f"pipx install --force --python {python} --system-site-packages '.[tray-system]'"


def install_hint(machine: Machine | None = None) -> str:
    """One or two sentences naming the commands that install the tray here.

    :param machine: default :func:`probe_machine` (runs the system Python once).
    :returns: text starting with a capital and ending with a full stop.
    """
    machine = machine or probe_machine()
    source_build = "Install the [tray] extra from the ohsync source folder: `pipx install --force '.[tray]'`"
    if not machine.platform.startswith("linux"):
        return source_build + " (or `pip install --user '.[tray]'`)."
    py = machine.system_python
    family = machine.family
    if py is not None and py.usable and (family in SYSTEM_PACKAGES or "gi" not in py.missing):
        install = system_install_command(py.path)
        if py.missing:
            if family in SYSTEM_PACKAGES:
                installer, names = SYSTEM_PACKAGES[family]
                first = f"`{installer} {' '.join(names[m] for m in py.missing)}`"
            else:
                first = f"your distribution's packages of the {', '.join(py.missing)} typelibs"
            return (f"Use the distribution's prebuilt GObject bindings (nothing to compile): install {first}, "
                    f"then in the ohsync source folder run `{install}` (see the README).")
        return (f"Use the distribution's prebuilt GObject bindings ({py.path} has them): in the ohsync source "
                f"folder run `{install}` (nothing to compile; see the README).")
    packages = f" ({BUILD_PACKAGES[family]})" if family in BUILD_PACKAGES else ""
    why = ""
    if py is not None and not py.usable:
        why = f"{py.path} is Python {py.version[0]}.{py.version[1]}, older than ohsync needs, so "
    return (f"{source_build} (or `pip install --user '.[tray]'`); {why}pip builds PyGObject, which needs a "
            f"compiler and its -dev packages first{packages}; see the README.")
