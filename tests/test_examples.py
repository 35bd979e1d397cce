"""The example scripts run end to end (each is the README's promise of a working recipe)."""

from __future__ import annotations

import runpy
from pathlib import Path

EXAMPLES = Path(__file__).parents[1] / "examples"


def test_quickstart_prints_rising_validation_mrr(capsys) -> None:
    runpy.run_path(str(EXAMPLES / "quickstart.py"), run_name="__main__")
    lines = capsys.readouterr().out.splitlines()
    mrrs = [float(line.split("MRR ")[1].split()[0]) for line in lines if line.startswith("epoch")]
    assert len(mrrs) == 5
    assert mrrs[-1] > mrrs[0]
    assert any(line.startswith("Rank-based metrics over 1322 ranking tasks") for line in lines)
