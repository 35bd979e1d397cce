"""Every Python block of the README and then of the guide (docs/guide.md and its topic pages, which continue it) runs
as written, in order, in one fresh interpreter (what a reader does).

Blocks that cannot run here (a torchrun launch, signatures) are shown in ``text`` fences and are not run. The
quickstart block must really train: its validation MRR rises.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the README, then the guide and its topic pages, in the order their blocks continue one another
GUIDE = ("guide.md", "models.md", "training.md", "results.md", "scale.md", "temporal.md")
DOCUMENTS = (ROOT / "README.md", *(ROOT / "docs" / name for name in GUIDE))


def python_blocks() -> list[tuple[str, int, str]]:
    """(document, line number, code) of every ```python block, in reading order."""
    blocks = []
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        for match in re.finditer(r"```python\n(.*?)```", text, re.S):
            blocks.append((document.name, text[: match.start()].count("\n") + 2, match.group(1)))
    return blocks


def test_there_are_blocks_to_run() -> None:
    assert len(python_blocks()) >= 5


def test_every_python_block_runs_in_order(tmp_path: Path) -> None:
    script = "\n".join(f"# --- {name} line {line}\n{code}" for name, line, code in python_blocks())
    (tmp_path / "readme.py").write_text(script, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "readme.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    mrrs = [float(line.split("MRR ")[1].split()[0]) for line in done.stdout.splitlines() if line.startswith("epoch")]
    assert len(mrrs) == 5 and mrrs[-1] > mrrs[0] + 0.2  # the quickstart trains
    quoted = re.search(r"this prints `(full filtered [0-9.]+, sampled among 50 negatives [0-9.]+)` on every run",
                       (ROOT / "README.md").read_text(encoding="utf-8"))  # fmt: skip
    assert quoted is not None and f"test MRR: {quoted.group(1)}" in done.stdout.splitlines()  # seeded: as quoted
    assert (tmp_path / "curve.png").is_file()  # the stratified block's plot


def test_the_readme_is_a_front_page() -> None:
    """The README reads as a front page (detail lives in docs/): at most 250 lines (it had grown to 299)."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, len(lines)
