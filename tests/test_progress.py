"""Progress bars leave clean logs: none in a log file or pipe, none with use_tqdm=False, gone when done."""

from __future__ import annotations

import io
import subprocess
import sys

from kgeval import RankBasedEvaluator
from tests.helpers.graphs import TableModel, quantised_table, random_graph

GRAPH = random_graph(0, num_entities=8, num_relations=2, num_triples=10, num_filter=5)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def evaluate(**kwargs) -> None:
    RankBasedEvaluator().evaluate(TableModel(quantised_table(0, 8, 2)), GRAPH.triples, **kwargs)


def test_no_bar_in_a_log_file() -> None:
    log = io.StringIO()
    evaluate(tqdm_kwargs={"file": log})
    assert log.getvalue() == ""


def test_no_bar_when_asked_for_none() -> None:
    terminal = Terminal()
    evaluate(use_tqdm=False, tqdm_kwargs={"file": terminal})
    assert terminal.getvalue() == ""


def test_a_terminal_bar_is_cleared_when_done() -> None:
    terminal = Terminal()
    evaluate(tqdm_kwargs={"file": terminal})
    text = terminal.getvalue()
    assert "Evaluating" in text
    assert text.rstrip(" ").endswith("\r")  # the last write clears the line: nothing stale stays


def test_the_demo_writes_clean_lines_to_a_pipe() -> None:
    """The reported case: the demo's output, piped to a log, held bar fragments and a stale 0% bar."""
    done = subprocess.run(
        [sys.executable, "-m", "kgeval", "demo", "--dataset", "nations", "--epochs", "1", "--dim", "4"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stdout + done.stderr
    assert "%|" not in done.stderr
