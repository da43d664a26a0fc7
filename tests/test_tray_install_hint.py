"""The tray's install hint names the command that fits the machine: the distribution's prebuilt
GObject bindings (``'.[tray-system]'`` in a venv of ``/usr/bin/python3`` with its site-packages)
where that Python can use them, else pip's source build of PyGObject (``'.[tray]'``)."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from ohsync.tray import install_hint as hint
from ohsync.tray.install_hint import Machine, SystemPython, distribution_family, install_hint

REPO = Path(__file__).resolve().parent.parent
SYSTEM_WAY = "pipx install --force --python /usr/bin/python3 --system-site-packages '.[tray-system]'"
SOURCE_WAY = "pipx install --force '.[tray]'"
ALL = ("gi", "Gtk", "AyatanaAppIndicator3")


def test_distribution_families_from_os_release() -> None:
    assert distribution_family({"ID": "debian"}) == "debian"
    assert distribution_family({"ID": "ubuntu", "ID_LIKE": "debian"}) == "debian"
    assert distribution_family({"ID": "linuxmint", "ID_LIKE": '"ubuntu debian"'}) == "debian"
    assert distribution_family({"ID": "fedora"}) == "fedora"
    assert distribution_family({"ID": '"rocky"', "ID_LIKE": '"rhel centos fedora"'}) == "fedora"
    assert distribution_family({"ID": "arch"}) is None
    assert distribution_family({}) is None


def test_debian_with_python3_gi_names_the_system_way_only() -> None:
    text = install_hint(Machine("linux", "debian", SystemPython("/usr/bin/python3", (3, 11))))
    assert SYSTEM_WAY in text and "nothing to compile" in text
    assert "'.[tray]'" not in text and "sudo apt" not in text and "-dev" not in text


def test_debian_without_the_bindings_names_the_packages_then_the_command() -> None:
    text = install_hint(Machine("linux", "debian", SystemPython("/usr/bin/python3", (3, 11), ALL)))
    assert "`sudo apt install python3-gi gir1.2-gtk-3.0 gir1.2-ayatanaappindicator3-0.1`" in text
    assert text.index("sudo apt install") < text.index(SYSTEM_WAY)
    only_menu = install_hint(Machine("linux", "debian", SystemPython("/usr/bin/python3", (3, 12),
                                                                     ("AyatanaAppIndicator3",))))
    assert "`sudo apt install gir1.2-ayatanaappindicator3-0.1`" in only_menu and SYSTEM_WAY in only_menu


def test_fedora_names_its_packages() -> None:
    text = install_hint(Machine("linux", "fedora", SystemPython("/usr/bin/python3", (3, 13), ALL)))
    assert "`sudo dnf install python3-gobject gtk3 libayatana-appindicator-gtk3`" in text and SYSTEM_WAY in text


def test_an_old_system_python_falls_back_to_the_source_build_and_says_why() -> None:
    text = install_hint(Machine("linux", "debian", SystemPython("/usr/bin/python3", (3, 10))))
    assert SOURCE_WAY in text and "'.[tray-system]'" not in text
    assert "/usr/bin/python3 is Python 3.10" in text and "libgirepository1.0-dev" in text


def test_no_system_python_names_the_source_build_with_its_dev_packages() -> None:
    assert "gobject-introspection-devel" in install_hint(Machine("linux", "fedora", None))
    text = install_hint(Machine("linux", "debian", None))
    assert SOURCE_WAY in text and "pip install --user '.[tray]'" in text and "libgirepository1.0-dev" in text


def test_an_unknown_distribution_uses_its_bindings_when_they_are_there() -> None:
    with_gi = install_hint(Machine("linux", None, SystemPython("/usr/bin/python3", (3, 12), ("Gtk",))))
    assert SYSTEM_WAY in with_gi and "Gtk typelibs" in with_gi
    without = install_hint(Machine("linux", None, SystemPython("/usr/bin/python3", (3, 12), ALL)))
    assert SOURCE_WAY in without and "'.[tray-system]'" not in without


def test_macos_needs_no_system_packages() -> None:
    text = install_hint(Machine("darwin"))
    assert SOURCE_WAY in text and "apt" not in text and "-dev" not in text


def test_the_probe_asks_the_named_python() -> None:
    """Run with this test's own interpreter: its version comes back, and what it lacks is among the three."""
    found = hint.probe_system_python(sys.executable)
    assert found is not None and found.version == sys.version_info[:2]
    assert set(found.missing) <= set(ALL)
    assert hint.probe_system_python("/nonexistent/python3") is None


def test_the_system_extra_does_not_pull_pygobject() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    names = {r.split(";")[0].split(">")[0].split("<")[0].split("=")[0].strip().lower() for r in extras["tray-system"]}
    assert "pygobject" not in names and {"pystray", "pillow", "jeepney"} <= names
    # the source-build extra keeps the pin Debian 12's girepository 1.0 needs
    assert any(r.startswith("PyGObject>=3.50,<3.52") for r in extras["tray"])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the distribution's Python is probed on Linux")
def test_this_machine_gets_one_of_the_two_ways() -> None:
    text = install_hint()
    assert ("'.[tray-system]'" in text) != (SOURCE_WAY in text)
    assert text[0].isupper() and text.endswith(".")


def test_the_readme_tray_section_shows_both_ways_and_the_hosts() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### The tray icon"):readme.index("### Starting at login")]
    assert hint.system_install_command().replace("--force ", "") in section  # the command the hints name
    for installer, names in hint.SYSTEM_PACKAGES.values():
        assert f"{installer} pipx {' '.join(names.values())}" in section
    for packages in hint.BUILD_PACKAGES.values():
        assert packages in section
    assert SOURCE_WAY in section and "pip install --user '.[tray]'" in section
    for host in ("GNOME", "gnome-shell-extension-appindicator", "KDE", "XFCE", "(docs/desktop-testing.md)"):
        assert host in section, host
