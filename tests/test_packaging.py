"""What ``pip install .`` puts in place: the package's py.typed marker (downstream type checkers read kgeval's
annotations) and the licence the metadata declares, read from a wheel built from this checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    setuptools = pytest.importorskip("setuptools")
    if int(setuptools.__version__.split(".")[0]) < 77:
        pytest.skip(f"the build needs setuptools >= 77 (pyproject.toml), found {setuptools.__version__}")
    out = tmp_path_factory.mktemp("wheel")
    # a copy of what the build reads: setuptools builds in the source folder, and a build/ left there from an
    # earlier build would keep modules that have since moved
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "kgeval", source / "kgeval", ignore=shutil.ignore_patterns("__pycache__"))
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-cache-dir",
               "--quiet", "-w", str(out), str(source)]  # fmt: skip
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    assert completed.returncode == 0, completed.stderr
    (path,) = out.glob("kgeval-*.whl")
    return zipfile.ZipFile(path)


@pytest.mark.slow
def test_the_wheel_ships_py_typed_and_the_licence(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    assert "kgeval/py.typed" in names
    licences = [name for name in names if name.endswith("LICENSE") and ".dist-info/" in name]
    assert licences, sorted(name for name in names if ".dist-info/" in name)
    assert wheel.read(licences[0]).decode().startswith("MIT License")
    (metadata,) = [name for name in names if name.endswith(".dist-info/METADATA")]
    text = wheel.read(metadata).decode()
    assert "License-Expression: MIT" in text and "License-File: LICENSE" in text


@pytest.mark.slow
def test_the_wheel_holds_the_new_packages_and_no_stale_module(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    for package in ("cli", "audit", "variants", "many"):
        assert f"kgeval/{package}/__init__.py" in names
    for stale in ("cli.py", "audit.py", "many.py", "macro.py", "temporal_audit.py", "inductive_audit.py"):
        assert f"kgeval/{stale}" not in names
