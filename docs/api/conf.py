"""Sphinx configuration of kgeval's API reference, rendered from the docstrings (numpydoc sections, Sphinx roles).

Build (warnings are errors; nitpicky: every cross-reference must resolve)::

    python -m sphinx -W --keep-going -n -b html docs/api docs/api/_build/html

The pages come from the code: each page holds a ``kgeval-module`` directive (defined below) naming a module; it
documents that module and each of its public submodules: the names of the module's ``__all__`` that it defines,
and a list of links for those it re-exports, to where they are described. So each object is described once, in
the public module that defines it (or, defined in a private module, in the public one that exports it), and a new
name or submodule appears in the reference without an edit here. A reference through another public path of an
object (``kgeval.RankBasedEvaluator``, ``kgeval.variants.MacroRankBasedEvaluator``, or a name imported into the
module whose docstring names it) resolves to that description (``_follow_imports``, ``_resolve_public_path``); an
old path that only a deprecation shim keeps importable does not.

Other libraries' objects (torch, NumPy, pandas, PyKEEN, the standard library, ...) cannot be resolved offline
(intersphinx would fetch their inventories): ``nitpick_ignore_regex`` lists them by package, and
``nitpick_ignore`` the few kgeval names left undescribed on purpose, so any other reference to a kgeval object
that does not resolve fails the build.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import pkgutil
import re
import types
import warnings
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.util.docutils import SphinxDirective

import kgeval

project = "kgeval"
author = "kgeval contributors"
release = kgeval.__version__
version = release

extensions = ["sphinx.ext.autodoc", "sphinx.ext.autosummary", "numpydoc"]
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_static_path: list[str] = []
nitpicky = True

# the optional libraries whose adapters import them at module level: mocked, so the reference builds with the
# docs extra alone and renders alike whether they are installed or not
autodoc_mock_imports = ["pykeen", "torch_geometric", "torchkge", "dicee"]
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autosummary_generate = False

# numpydoc renders the sections' types as text (no cross-reference per word of "dict of str to int, optional") and
# leaves the member tables of classes to autodoc
numpydoc_show_class_members = False
numpydoc_xref_param_type = False
numpydoc_class_members_toctree = False

#: packages whose objects cannot be resolved offline: kgeval's dependencies, the libraries it integrates with (and
#: the aliases nn / np / pd), and the standard library's modules that annotations name
_FOREIGN = (
    "torch", "nn", "numpy", "np", "pandas", "pd", "tqdm", "numba", "triton", "scipy", "matplotlib", "pykeen",
    "torch_geometric", "torchkge", "dicee", "lightning", "pytorch_lightning", "wandb", "mlflow",
    "collections", "os", "pathlib", "importlib", "datetime", "fractions", "typing",
)  # fmt: skip
#: other libraries' types that annotations give bare (imported under TYPE_CHECKING only)
_FOREIGN_BARE = ("Figure",)
nitpick_ignore_regex = [
    (r"py:.*", rf"({'|'.join(_FOREIGN)})\..+"),
    (r"py:.*", rf"({'|'.join(_FOREIGN_BARE)})"),
]

#: kgeval types that public signatures name but the reference does not describe (no module's __all__ has them)
nitpick_ignore = [
    ("py:class", "kgeval.records.Ranks"),  # the TypeVar of ranks_of_type: a NumPy array or a tensor
    ("py:class", "kgeval._engine.sizes.MeasuredBatch"),  # RankBasedEvaluator.measured_batches' values
    ("py:class", "kgeval._fingerprints.ScoreSignature"),  # RankBasedEvaluator.score_signature's value
]
#: references in docstrings of kgeval.datasets, which is being edited elsewhere at the time of writing, to fix there
#: (then removed here): a warning class and two functions that their module's __all__ does not list
nitpick_ignore += [
    ("py:class", "kgeval.datasets.labelled.DuplicatesWarning"),
    ("py:class", "DuplicatesWarning"),
    ("py:func", "kgeval.datasets.temporal.time_keys"),
    ("py:func", "given_time_ids"),
]

#: the modules the pages document, each with its public submodules: kgeval itself (kgeval.rst, its exports) and
#: the root of each ``kgeval-module`` directive of the pages (kgeval.cli is left to docs/cli.md)
_PAGE_ROOTS = sorted(
    match
    for page in Path(__file__).parent.glob("*.rst")
    for match in re.findall(r"^\.\. kgeval-module:: (\S+)$", page.read_text(encoding="utf-8"), re.MULTILINE)
)
DOCUMENTED_ROOTS = ("kgeval", *_PAGE_ROOTS)


@functools.cache
def public_submodules(name: str) -> tuple[str, ...]:
    """``name``'s public submodules, recursively (none for a plain module, and none of kgeval itself: the top-level
    modules are roots of their own)."""
    module = importlib.import_module(name)
    if name == "kgeval" or not hasattr(module, "__path__"):
        return ()
    found = []
    for info in pkgutil.iter_modules(module.__path__):
        if not info.name.startswith("_"):
            found.append(f"{name}.{info.name}")
            found += public_submodules(f"{name}.{info.name}")
    return tuple(found)


@functools.cache
def documented_modules() -> tuple[str, ...]:
    """Every module the reference documents."""
    return tuple(m for root in DOCUMENTED_ROOTS for m in (root, *public_submodules(root)))


@functools.cache
def _defined_and_imported(module: str) -> tuple[set[str], dict[str, tuple[str, str]]]:
    """The names ``module`` defines at its top level, and those it imports: name -> (source module, name there)."""
    tree = ast.parse(inspect.getsource(importlib.import_module(module)))
    defined: set[str] = set()
    imported: dict[str, tuple[str, str]] = {}

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.add(node.name)
            elif isinstance(node, ast.Assign):
                defined.update(t.id for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                defined.add(node.target.id)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    imported[alias.asname or alias.name] = (node.module, alias.name)
            elif isinstance(node, ast.If):  # e.g. definitions under a version check
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)

    visit(tree.body)
    return defined, imported


def home_of(module: str, name: str, documented: frozenset[str]) -> str:
    """The documented module whose page describes ``module.name``: the one that defines it, or, for an object
    defined in a private module, the last documented module that re-exports it."""
    defined, imported = _defined_and_imported(module)
    if name in defined or name not in imported:
        return module
    source, original = imported[name]
    if source not in documented:
        return module
    return home_of(source, original, documented)


def _is_code(value: Any) -> bool:
    """A class or function (a member autodoc finds), as opposed to a constant or a type alias such as
    ``tuple[float, float]`` (which passes for a class on some Pythons)."""
    return inspect.isroutine(value) or (inspect.isclass(value) and not isinstance(value, types.GenericAlias))


class ModuleDirective(SphinxDirective):
    """``.. kgeval-module:: kgeval.variants``: the module's docstring, the names of its ``__all__`` it defines,
    and a list of those it re-exports, each linked to its description; then each public submodule alike."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        root = self.arguments[0]
        documented = frozenset(documented_modules())
        lines: list[str] = []
        for module in (root, *public_submodules(root)):
            depth = module.count(".") - root.count(".")
            lines += self._module_lines(module, depth, documented)
        self.state_machine.insert_input(StringList(lines, source=f"<kgeval-module {root}>"), "")
        return []

    @staticmethod
    def _module_lines(module: str, depth: int, documented: frozenset[str]) -> list[str]:
        names = list(getattr(importlib.import_module(module), "__all__", ()))
        here = [n for n in names if home_of(module, n, documented) == module]
        elsewhere = [(n, home_of(module, n, documented)) for n in names if n not in here]
        lines = []
        if depth:
            title = f"``{module}``"
            lines += [title, "-~^"[min(depth, 3) - 1] * len(title), ""]
        # autodoc documents a module's constant only where a ``#:`` comment documents it: each constant and alias
        # of __all__ gets its autodata directive (right below the module's docstring), the classes and functions
        # are the module's members (undoc-members: a name of __all__ is public even without a docstring)
        values = {n: getattr(importlib.import_module(module), n) for n in here}
        data = [n for n in here if not _is_code(values[n])]
        members = [n for n in here if n not in data]
        lines += [f".. automodule:: {module}"]
        lines += [f"   :members: {', '.join(members)}", "   :undoc-members:"] if members else ["   :no-members:"]
        lines.append("")
        for name in data:
            lines += [f"   .. autodata:: {name}", ""]
        if elsewhere:
            lines += [f"Re-exported by ``{module}``, documented where they are defined:", ""]
            lines += [f"- :py:obj:`{name} <{home}.{name}>`" for name, home in elsewhere]
            lines.append("")
        return lines


@functools.cache
def _import(path: str) -> tuple[Any, str] | None:
    """The object at the longest importable prefix of the dotted ``path`` and that prefix; None when not even its
    package imports. Deprecated paths (a shim that warns) count as not importable."""
    parts = path.split(".")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        obj: Any = None
        for i in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except Exception:
                continue
            if not getattr(obj, "__file__", None):  # a stand-in module, not a file of the package
                return None
            found = i
            break
        else:
            return None
        for part in parts[found:]:
            try:  # a class's own entry (a classmethod itself, not a new bound method each time: identity holds)
                attribute = inspect.getattr_static(obj, part) if isinstance(obj, type) else getattr(obj, part)
            except Exception:
                break
            if isinstance(attribute, types.ModuleType) and not getattr(attribute, "__file__", None):
                break
            obj, found = attribute, found + 1
    return obj, ".".join(parts[:found])


#: (last name, id of the object) -> the names under which the reference describes that object; built on the first
#: unresolved reference of each build (all pages are read by then), the objects kept so that their ids stay theirs
_DOCUMENTED: dict[tuple[str, int], list[str]] = {}
_KEEP_ALIVE: list[Any] = []


def _forget_documented(app: Sphinx, env: BuildEnvironment) -> None:
    _DOCUMENTED.clear()
    _KEEP_ALIVE.clear()


def _documented_names(env: BuildEnvironment) -> dict[tuple[str, int], list[str]]:
    if not _DOCUMENTED:
        for name in env.get_domain("py").objects:
            imported = _import(name)
            if imported is None or imported[1] != name:
                continue
            _KEEP_ALIVE.append(imported[0])
            _DOCUMENTED.setdefault((name.rpartition(".")[2], id(imported[0])), []).append(name)
    return _DOCUMENTED


def _described_class(node: nodes.Element) -> type | None:
    """The kgeval class whose description (its signature or content, or a member's) holds ``node``, if any."""
    parent = node.parent
    while parent is not None and not isinstance(parent, addnodes.desc):
        parent = parent.parent
    signatures = [] if parent is None else list(parent.findall(addnodes.desc_signature))
    if not signatures or not signatures[0].get("module"):
        return None
    path = f"{signatures[0]['module']}.{signatures[0]['fullname']}"
    for candidate in (path, path.rpartition(".")[0]):
        found = _import(candidate)
        if found is not None and found[1] == candidate and isinstance(found[0], type):
            return found[0]
    return None


def _resolve_public_path(app: Sphinx, env: BuildEnvironment, node: nodes.Element, contnode: nodes.Node) -> Any:
    """A kgeval object named by a path that is not its documented one (a re-export, or a name imported into the
    module whose docstring names it) resolves to its description, found by identity."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip("~.")
    module, klass = node.get("py:module"), node.get("py:class")
    candidates = [target]
    if module and klass:
        candidates.append(f"{module}.{klass}.{target}")
    if module:
        candidates.append(f"{module}.{target}")
    owner = _described_class(node)
    if owner is not None:  # an inherited field's annotation names what the module of its declaring class imports
        candidates += [f"{base.__module__}.{target}" for base in owner.__mro__[1:]]
    domain = env.get_domain("py")
    documented = _documented_names(env)
    for candidate in candidates:
        if not candidate.startswith("kgeval."):
            continue
        imported = _import(candidate)
        if imported is None:
            continue
        obj, prefix = imported
        rest = candidate[len(prefix) :]
        # an annotation's reference is a class one, also to a type alias (documented as data: ``Side``)
        types_ = (node["reftype"], "data") if node["reftype"] == "class" else (node["reftype"],)
        for name in documented.get((prefix.rpartition(".")[2], id(obj)), []):
            for typ in types_:
                resolved = domain.resolve_xref(env, node["refdoc"], app.builder, typ, name + rest, node, contnode)
                if resolved is not None:
                    return resolved
    return None


def _follow_imports(app: Sphinx, doctree: nodes.document) -> None:
    """A relative reference (``:class:`RankSummary```, an annotation's ``RankBasedMetricResults``) to a name the
    module imports from kgeval names what that import names, as in Python; else Sphinx's suffix search could pick
    another object of the same name (kgeval.integrations.pykeen has its own RankBasedMetricResults). Imports under
    ``TYPE_CHECKING`` count too."""
    for node in doctree.findall(addnodes.pending_xref):
        module, target = node.get("py:module"), node.get("reftarget", "")
        if (
            node.get("refdomain") != "py"
            or not module
            or not module.startswith("kgeval")
            or target.startswith(("kgeval.", ".", "~"))
        ):
            continue
        first, _, rest = target.partition(".")
        klass = node.get("py:class")
        owner = _import(f"{module}.{klass}") if klass else None
        if owner is not None and owner[1] == f"{module}.{klass}" and hasattr(owner[0], first):
            continue  # a member of the class whose docstring names it: Sphinx's own search finds it
        try:
            defined, imported = _defined_and_imported(module)
        except (ImportError, OSError, TypeError, SyntaxError):
            continue
        if first in defined or first not in imported or not imported[first][0].startswith("kgeval"):
            continue
        source, original = imported[first]
        node["reftarget"] = f"{source}.{original}" + (f".{rest}" if rest else "")
        node.attributes.pop("refspecific", None)


def _signature(
    app: Sphinx, what: str, name: str, obj: Any, options: Any, signature: str | None, return_annotation: str | None
) -> tuple[str | None, str | None] | None:
    """Two fixes to the signatures, run before numpydoc's handler:

    - a dataclass field's ``default_factory`` shows as ``<factory>``, which is no Python: Sphinx then splits the
      signature at its commas and cross-references pieces such as ``dict[str``; ``...`` stands for it instead;
    - an object without a signature (a type alias such as ``tuple[float, float]``) answers for itself, as numpydoc's
      answer there makes Sphinx 9 fail ("list assignment index out of range").
    """
    if signature is None:
        return None, return_annotation
    if "<factory>" in signature:
        return signature.replace("<factory>", "..."), return_annotation
    return None


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("kgeval-module", ModuleDirective)
    app.connect("autodoc-process-signature", _signature, priority=400)
    app.connect("doctree-read", _follow_imports)
    app.connect("env-updated", _forget_documented)
    app.connect("missing-reference", _resolve_public_path)
    return {"parallel_read_safe": True}
