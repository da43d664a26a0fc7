"""The wheel holds every package of the product: pyproject.toml lists
``[tool.setuptools] packages`` explicitly (the top-level folders are mapped
into the ``ohsync`` namespace), so a new subpackage that is not listed
would work in the editable checkout and be missing from ``pip install .``
(``.ci/install-check.sh`` installs that way)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
#: a listed package of templates only (package data, no modules)
DATA_ONLY = {"ohsync.packaging"}


def _setuptools() -> dict[str, Any]:
    with open(REPO / "pyproject.toml", "rb") as fh:
        config: dict[str, Any] = tomllib.load(fh)["tool"]["setuptools"]
    return config


def _folder(package: str, package_dir: dict[str, str]) -> Path:
    """The folder of ``package`` (``ohsync.engine.client`` -> ``engine/client``)."""
    top = ".".join(package.split(".")[:2])
    return REPO / package_dir[top] / Path(*package.split(".")[2:])


def _module_folders(package_dir: dict[str, str]) -> set[str]:
    """Every package that holds a Python module, as a dotted name."""
    return {".".join((top, *path.parent.relative_to(REPO / folder).parts))
            for top, folder in package_dir.items() for path in (REPO / folder).rglob("*.py")}


def test_every_folder_of_python_modules_is_a_listed_package() -> None:
    config = _setuptools()
    found, listed = _module_folders(config["package-dir"]), set(config["packages"])
    assert {"ohsync.engine", "ohsync.engine.client", "ohsync.daemon.worker"} <= found
    assert sorted(found - listed) == [], "folders of Python modules that pyproject.toml does not install"
    assert sorted(listed - found - DATA_ONLY) == [], "pyproject.toml lists packages that hold no module"


def test_every_listed_package_has_an_init_module() -> None:
    config = _setuptools()
    missing = [p for p in config["packages"] if p not in DATA_ONLY
               and not (_folder(p, config["package-dir"]) / "__init__.py").is_file()]
    assert missing == [], f"listed packages without an __init__.py: {missing}"
