"""The API reference (docs/api): it builds with warnings as errors and nitpicky references, and covers the API.

The build is the check that keeps the docstrings' markup and cross-references right: a role naming a moved,
misspelled or undocumented kgeval object fails it (docs/api/conf.py says what resolves and what is ignored).
"""

from __future__ import annotations

import importlib.util
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import kgeval

API_DOCS = Path(__file__).resolve().parent.parent / "docs" / "api"
#: public modules of the package that have no page of the reference, and why
NOT_IN_REFERENCE = {"kgeval.cli": "the command line, documented in docs/cli.md"}


def _sources() -> str:
    return "\n".join(page.read_text(encoding="utf-8") for page in sorted(API_DOCS.glob("*.rst")))


def test_every_export_of_the_package_is_in_the_reference() -> None:
    sources = _sources()
    missing = [name for name in kgeval.__all__ if not re.search(rf"\bkgeval\.{re.escape(name)}\b", sources)]
    assert not missing, f"names of kgeval.__all__ missing from docs/api/kgeval.rst: {missing}"


def test_every_public_module_has_a_page() -> None:
    sources = _sources()
    documented = set(re.findall(r"^\.\. kgeval-module:: (\S+)$", sources, re.MULTILINE))
    public = {
        f"kgeval.{info.name}"
        for info in pkgutil.iter_modules(kgeval.__path__)
        if not info.name.startswith("_") and f"kgeval.{info.name}" not in NOT_IN_REFERENCE
    }
    assert public - documented == set(), "public modules without a page (add docs/api/<module>.rst)"
    index = (API_DOCS / "index.rst").read_text(encoding="utf-8")
    pages = {page.stem for page in API_DOCS.glob("*.rst")} - {"index"}
    assert {page for page in pages if not re.search(rf"^\s+{re.escape(page)}$", index, re.MULTILINE)} == set()


@pytest.mark.slow
def test_reference_builds_without_warnings(tmp_path: Path) -> None:
    for package in ("sphinx", "numpydoc"):
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"{package} is not installed (the docs extra: pip install -e '.[docs]')")
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html"]
    build = subprocess.run(
        [*command, str(API_DOCS), str(tmp_path / "html")],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert build.returncode == 0, f"the API reference does not build cleanly:\n{build.stderr}{build.stdout}"
    assert (tmp_path / "html" / "kgeval.html").is_file()
