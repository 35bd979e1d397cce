"""The package's import graph, read with ``ast``: no cycles, and no function-local import of kgeval's own modules
except the listed ones, each of which defers an optional or costly dependency."""

from __future__ import annotations

import ast
from pathlib import Path

import kgeval

PACKAGE = Path(kgeval.__file__).resolve().parent

#: function-local imports of kgeval's own modules that are allowed, and why
DEFERRED = {
    # the view modules import their library (pykeen, torch_geometric, torchkge) at module level
    ("kgeval.adapters", "kgeval.adapters.pykeen"): "pykeen is optional",
    ("kgeval.adapters", "kgeval.adapters.pyg"): "torch_geometric is optional",
    ("kgeval.adapters", "kgeval.adapters.torchkge"): "torchkge is optional",
    ("kgeval.adapters", "kgeval.adapters.dicee"): "dicee is optional",
    ("kgeval.models.checkpoint", "kgeval.adapters.dicee"): "dicee is optional (its experiment folders)",
    # the compiled loop imports numba, which costs ~0.5 s per process: only the numba kernel's first use pays it
    ("kgeval._engine.kernels", "kgeval._engine.kernels.numba_loop"): "numba loads only when the numba kernel runs",
    (
        "kgeval._engine.kernels.block_counting",
        "kgeval._engine.kernels.numba_loop",
    ): "numba loads only when blocks are counted",
    ("kgeval._engine.kernels", "kgeval._engine.kernels.triton_counts"): "triton is optional (the gpu extra)",
    ("kgeval._engine.kernels", "kgeval._engine.kernels.triton_gemm"): "triton is optional (the gpu extra)",
    ("kgeval.analysis.stratified", "kgeval.analysis.plot"): "matplotlib is optional",
    # results.to_html is the report's door from a results object; the report module is its own, and imports results
    # only for annotations (a module-level import would be a cycle)
    ("kgeval.results", "kgeval.report"): "the HTML report, built on the results it is given",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def own_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def resolve(target: str, modules: dict[str, Path]) -> str | None:
    """The kgeval module an import names (``from kgeval import results`` names kgeval.results)."""
    while target and target not in modules:
        target = target.rpartition(".")[0]
    return target or None


def imports(path: Path, modules: dict[str, Path], annotations: bool = False) -> tuple[set[str], set[str]]:
    """(module-level imports, function-local imports) of kgeval modules in one file; ``if TYPE_CHECKING:`` blocks
    (annotations only, never executed) are left out unless ``annotations`` (then counted as module-level)."""
    tree = ast.parse(path.read_text())
    top: set[str] = set()
    local: set[str] = set()

    def visit(node: ast.AST, in_function: bool) -> None:
        checking = isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        if checking and not annotations:
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif node.module and node.level == 0:
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            for name in names:
                if name.startswith("kgeval.") or name == "kgeval":
                    resolved = resolve(name, modules)
                    if resolved:
                        (local if in_function else top).add(resolved)
        for child in ast.iter_child_nodes(node):
            visit(child, in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))

    visit(tree, False)
    return top, local


def graph(annotations: bool = False) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    modules = own_modules()
    tops, locals_ = {}, {}
    for name, path in modules.items():
        top, local = imports(path, modules, annotations)
        tops[name], locals_[name] = top - {name}, local - {name}
    return tops, locals_


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(edges.get(node, ())):
            if other not in index:
                connect(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            connect(node)
    return found


def test_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    tops, locals_ = graph()
    combined = {name: tops[name] | locals_[name] for name in tops}
    assert cycles(combined) == []


def test_function_local_imports_of_own_modules_are_the_listed_ones() -> None:
    _tops, locals_ = graph()
    found = {(name, target) for name, targets in locals_.items() for target in targets}
    assert found == set(DEFERRED)


def test_analyses_never_import_the_results_class_and_the_engine_never_imports_upward() -> None:
    tops, locals_ = graph()
    for name in tops:
        targets = tops[name] | locals_[name]
        if name.startswith("kgeval.analysis"):
            assert "kgeval.results" not in targets, name
            assert "kgeval.evaluator" not in targets, name
        if name.startswith("kgeval._engine"):
            upward = {t for t in targets if t in ("kgeval.results", "kgeval.evaluator", "kgeval.analysis")}
            assert not upward, (name, upward)


def test_test_helpers_stay_independent_of_kgeval() -> None:
    """tests/helpers is the reference the suite trusts: it must not import the code under test."""
    helpers = Path(__file__).resolve().parent / "helpers"
    for path in sorted(helpers.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                assert not any(name == "kgeval" or name.startswith("kgeval.") for name in names), path.name


def test_the_engine_has_one_entry_point() -> None:
    """Outside the engine, only the entry points (evaluator, predict, sampled, temporal: the second front, and
    classification: labelled triples scored, and every pair's tiles visited) import it, through kgeval._engine."""
    tops, locals_ = graph()
    for name in tops:
        if name.startswith("kgeval._engine"):
            continue
        engine = {t for t in tops[name] | locals_[name] if t.startswith("kgeval._engine")}
        entry_point = name in (
            "kgeval.evaluator",
            "kgeval.predict",
            "kgeval.variants.sampled",
            "kgeval.variants.temporal",
            "kgeval.variants.classification.triples",
            "kgeval.variants.classification.all_pairs",
            "kgeval.variants.examples",
        )
        assert engine <= ({"kgeval._engine"} if entry_point else set()), (name, engine)


def test_the_drop_ins_sit_on_top_and_use_public_names_only() -> None:
    """kgeval.integrations holds the drop-ins (PyKEEN's evaluators, Lightning), built on kgeval's public names: no
    module below them imports them, and they import no private module (``_checks``, ``_engine``, ...)."""
    tops, locals_ = graph()
    for name in tops:
        targets = tops[name] | locals_[name]
        if name.startswith("kgeval.integrations"):
            private = {t for t in targets if any(part.startswith("_") for part in t.split("."))}
            assert not private, (name, private)
        else:
            assert not {t for t in targets if t.startswith("kgeval.integrations")}, name


def test_the_evaluator_imports_a_handful_of_names_from_the_engine() -> None:
    """The evaluator checks its arguments, calls the engine's front door and builds results."""
    tree = ast.parse((PACKAGE / "evaluator.py").read_text())
    names = [alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
             and node.module.startswith("kgeval._engine") for alias in node.names]  # fmt: skip
    assert len(names) <= 6, names


def _all_edges(annotations: bool = True) -> dict[str, set[str]]:
    """Every import of every module: module-level, function-local and (by default) ``TYPE_CHECKING`` ones."""
    tops, locals_ = graph(annotations)
    return {name: tops[name] | locals_[name] for name in tops}


def test_imports_under_type_checking_are_read_when_asked(tmp_path: Path) -> None:
    """The annotation-only imports are found (else the cycle test below could not fail)."""
    modules = {"kgeval.a": tmp_path / "a.py", "kgeval.b": tmp_path / "b.py"}
    modules["kgeval.a"].write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kgeval.b import B\n")
    assert imports(modules["kgeval.a"], modules) == (set(), set())
    assert imports(modules["kgeval.a"], modules, annotations=True) == ({"kgeval.b"}, set())


def test_no_import_cycles_even_among_annotations() -> None:
    """Views and analyses read results through structural types (kgeval.analysis.readings), so not even an
    annotation closes a cycle."""
    assert cycles(_all_edges()) == []


def test_analyses_and_the_report_never_name_the_results_class() -> None:
    for name, targets in _all_edges().items():
        if name.startswith("kgeval.analysis") or name == "kgeval.report":
            assert "kgeval.results" not in targets, name


def test_no_module_imports_the_package_facade() -> None:
    """Modules import what they use from the module that defines it; the facade only re-exports."""
    for name, targets in _all_edges().items():
        assert "kgeval" not in targets, name


def _in(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_only_the_command_line_imports_the_command_line() -> None:
    for name, targets in _all_edges().items():
        if any(_in(target, "kgeval.cli") for target in targets):
            assert _in(name, "kgeval.cli") or name == "kgeval.__main__", name


def test_the_audits_and_many_graph_runs_are_imported_by_the_command_line_only() -> None:
    for name, targets in _all_edges().items():
        for package in ("kgeval.audit", "kgeval.many"):
            if any(_in(target, package) for target in targets):
                assert _in(name, package) or _in(name, "kgeval.cli"), (name, package)


def test_the_variants_sit_below_the_audits_the_command_line_and_many_graph_runs() -> None:
    for name, targets in _all_edges().items():
        if _in(name, "kgeval.variants"):
            above = {t for t in targets if any(_in(t, p) for p in ("kgeval.audit", "kgeval.many", "kgeval.cli"))}
            assert not above, (name, above)


def test_the_root_shows_the_layers() -> None:
    """At most ~30 modules at the root of the package: the fronts live in packages of their own."""
    assert len(list(PACKAGE.glob("*.py"))) <= 30
