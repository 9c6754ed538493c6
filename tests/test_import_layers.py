"""Atoll's import layers: no import runs from a lower layer up to a higher one, and no packages import each other.

Every module under ``atoll/`` is parsed with ``ast``; every ``import``/``from ... import`` counts, at module level
and inside functions and methods alike (a deferred import only hides a dependency, it does not remove it), relative
and absolute. The unit is the top-level package (``atoll.stage``, ``atoll.dsl`` ...) or, for a module directly
under ``atoll/``, that module. Layers, lowest first:

====  ===========================================  ==============================================================
rank  units                                        what they are
====  ===========================================  ==============================================================
0     ``errors``, ``markers``, ``_futures``,       leaf modules: exceptions, ``NotUsed``/``Done``, promises; rows
      ``_rows``, ``_impl``                         built from columns; the docstring of the internal packages' home
1     ``stage``, ``windowing``, ``checkpoint``,    what a custom operator is written with (GraphStage, logic,
      ``_portable``                                ports, shapes, attributes, substreams); window definitions;
                                                   checkpoint settings, storage and snapshot formats; exceptions
                                                   made picklable (islands' checkpoints, Ray calls)
2     ``materializer``                             traversal, builders, ``Keep``, the phased materializer
3     ``ops`` (in ``_impl``)                       the operator catalogue: GraphStages built on ``stage``
4     ``islands`` (in ``_impl``)                   the graph interpreter, the chunk pass, island assembly, the
                                                   local materializer
5     ``actors`` (in ``_impl``), ``interop``       the Ray side (island actors, channels, driver handles); the
                                                   sources and sinks at the edges (Spark, Parquet, Ray Data)
6     ``dsl``                                      Source/Flow/Sink, GraphDSL, Keep re-exported
7     ``testkit``, ``__init__`` (package ``atoll``)  probes for tests; the public top-level namespace
8     ``demo``                                     the runnable demo
9     ``__main__``                                 ``python -m atoll``: the version and the demo
====  ===========================================  ==============================================================

A unit may import itself, and any unit of a lower rank. Units that share a rank are independent: they may not
import each other. ``GraphStage.traversal_builder`` and ``>>`` between ports reach the layers above ``stage``
through hooks that those layers install (``stage.graph_stage.install_builder_factory``,
``stage.ports.active_graph_builder``), not through imports; ``Source.from_spark`` and its siblings import
``interop`` from ``dsl``, downward.

``ALLOWED`` lists the back-arrows that are still there, each with the reason it is not cut yet. It is meant to
shrink: an entry whose import is gone fails the test too, so the list cannot go stale. Everything else that runs
up the layers, or any cycle between units outside ``ALLOWED``, fails the test with the file and line.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

ROOT = Path(__file__).resolve().parent.parent / "atoll"

#: Rank of every unit (a subpackage of ``atoll`` or a module directly under ``atoll/``; ``__init__`` is the package
#: itself). A new package or top-level module must be placed here.
LAYERS: Dict[str, int] = {
    "errors": 0,
    "markers": 0,
    "_futures": 0,
    "_log_config": 0,
    "_rows": 0,
    "_impl": 0,
    "stage": 1,
    "windowing": 1,
    "checkpoint": 1,
    "_portable": 1,
    "materializer": 2,
    "ops": 3,
    "islands": 4,
    "actors": 5,
    "interop": 5,
    "dsl": 6,
    "console": 6,
    "testkit": 7,
    "__init__": 7,
    "demo": 8,
    "__main__": 9,
}

_KERNEL = "kernel rework in progress (another engineer owns this file now)"

#: Back-arrows not cut yet: (importing file relative to the repository root, imported module) -> why it stays.
ALLOWED: Dict[Tuple[str, str], str] = {
    # Materializer.local()/ray() import their implementations; to be cut by registering the backends (found by
    # name, anyio style) or by moving the factories up.
    ("atoll/materializer/materializer.py", "atoll._impl.islands.local_materializer"): _KERNEL,
    ("atoll/materializer/materializer.py", "atoll._impl.actors.ray_materializer"): _KERNEL,
    # Sub-materialization (substreams, recover_with, recursion) builds DSL blueprints and runs them with the local
    # materializer; to be replaced by a sub_materialize service of the island host.
    ("atoll/stage/substreams.py", "atoll._impl.islands.local_materializer"): _KERNEL,
    ("atoll/stage/substreams.py", "atoll.dsl.sink"): _KERNEL,
    ("atoll/stage/substreams.py", "atoll.dsl.source"): _KERNEL,
    ("atoll/_impl/ops/recover_with.py", "atoll.dsl.source"): _KERNEL,
    ("atoll/_impl/ops/recursion.py", "atoll.dsl.source"): _KERNEL,
    ("atoll/_impl/ops/recursion.py", "atoll.dsl.flow"): _KERNEL,
    # Keep now lives in materializer.keep (dsl.keep re-exports it); these two imports only need repointing.
    ("atoll/_impl/ops/recover_with.py", "atoll.dsl.keep"): _KERNEL,
    ("atoll/_impl/ops/recursion.py", "atoll.dsl.keep"): _KERNEL,
    # KillSwitches.single()/shared().flow() return DSL Flows; to return the stage itself (Flow.via accepts stages).
    ("atoll/_impl/ops/kill_switch.py", "atoll.dsl.flow"): _KERNEL,
}


# ---------------------------------------------------------------------------------------------------------------
# Reading the imports
# ---------------------------------------------------------------------------------------------------------------

def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _all_modules() -> Dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def imports_of(source: str, module: str, is_package: bool, known: Set[str]) -> Iterator[Tuple[int, str]]:
    """``(line, imported atoll module)`` for every import in ``source`` (the text of ``module``), at any depth.

    ``from X import name`` counts as an import of ``X.name`` when that is a module in ``known``, else of ``X``.
    """
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "atoll" or alias.name.startswith("atoll."):
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level - 1 > len(package) - 1:
                    raise AssertionError(f"{module}:{node.lineno}: relative import beyond the top-level package")
                base = package[: len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not (target == "atoll" or target.startswith("atoll.")):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield node.lineno, sub if sub in known else target


def unit_of(module: str) -> str:
    """``atoll.stage.ports`` -> ``stage``; ``atoll._impl.ops.sinks`` -> ``ops`` (the internal packages live under
    ``atoll/_impl/``); ``atoll.errors`` -> ``errors``; ``atoll`` -> ``__init__``."""
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "_impl":
        return parts[2]
    return parts[1] if len(parts) > 1 else "__init__"


def _edges() -> List[Tuple[str, int, str]]:
    """Every import between two different units: (file relative to the repository, line, imported module)."""
    modules = _all_modules()
    known = set(modules)
    out = []
    for name, path in modules.items():
        rel = path.relative_to(ROOT.parent).as_posix()
        for line, target in sorted(set(imports_of(path.read_text(), name, path.name == "__init__.py", known))):
            if unit_of(target) != unit_of(name):
                out.append((rel, line, target))
    return out


def _file_unit(rel: str) -> str:
    return unit_of(_module_name(ROOT.parent / rel))


def _back_arrows(edges) -> List[Tuple[str, int, str]]:
    bad = []
    for rel, line, target in edges:
        src, dst = _file_unit(rel), unit_of(target)
        if LAYERS[src] <= LAYERS[dst]:
            bad.append((rel, line, target))
    return bad


# ---------------------------------------------------------------------------------------------------------------
# The checks
# ---------------------------------------------------------------------------------------------------------------

def test_every_unit_has_a_layer():
    units = {unit_of(m) for m in _all_modules()}
    missing = sorted(units - set(LAYERS))
    assert not missing, f"place these packages/top-level modules in LAYERS (tests/test_import_layers.py): {missing}"
    gone = sorted(set(LAYERS) - units)
    assert not gone, f"LAYERS names units that no longer exist: {gone}"


def test_no_import_runs_up_the_layers():
    problems = []
    for rel, line, target in _back_arrows(_edges()):
        if (rel, target) in ALLOWED:
            continue
        src, dst = _file_unit(rel), unit_of(target)
        how = "a unit of the same layer" if LAYERS[src] == LAYERS[dst] else "a higher layer"
        problems.append(f"{rel}:{line}: {src} (layer {LAYERS[src]}) imports {target}, {how} "
                        f"({dst}, layer {LAYERS[dst]})")
    assert not problems, "imports against the layers (see the docstring of tests/test_import_layers.py):\n" + \
        "\n".join(problems)


def test_every_allowed_back_arrow_still_exists():
    present = {(rel, target) for rel, _line, target in _back_arrows(_edges())}
    stale = sorted(k for k in ALLOWED if k not in present)
    assert not stale, ("these allow-listed imports are gone (or no longer run up the layers): remove them from "
                       "ALLOWED in tests/test_import_layers.py:\n" + "\n".join(f"{f} -> {m}" for f, m in stale))


def test_no_cycle_between_units():
    """Tarjan's strongly connected components over the unit graph, allow-listed back-arrows left out."""
    graph: Dict[str, Dict[str, Tuple[str, int, str]]] = {}
    for rel, line, target in _edges():
        if (rel, target) in ALLOWED:
            continue
        graph.setdefault(_file_unit(rel), {}).setdefault(unit_of(target), (rel, line, target))

    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    cycles: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    lines = []
    for component in cycles:
        lines.append("cycle between " + ", ".join(component) + "; the imports in it that run up the layers:")
        for a in component:
            for b in component:
                if b in graph.get(a, {}) and LAYERS[a] <= LAYERS[b]:
                    rel, line, target = graph[a][b]
                    lines.append(f"  {rel}:{line}: {a} imports {target}")
    assert not cycles, "\n".join(lines)


def test_the_reader_sees_deferred_relative_and_absolute_imports():
    source = (
        "from __future__ import annotations\n"
        "import atoll.dsl.source\n"
        "from ..dsl import keep\n"
        "from .. import errors\n"
        "def f():\n"
        "    from .._impl.islands.interpreter import GraphInterpreter\n"
        "    class C:\n"
        "        def g(self):\n"
        "            import atoll\n"
        "            from . import ports\n"
    )
    known = {"atoll", "atoll.dsl", "atoll.dsl.source", "atoll.dsl.keep", "atoll.errors", "atoll._impl",
             "atoll._impl.islands", "atoll._impl.islands.interpreter", "atoll.stage", "atoll.stage.ports",
             "atoll.stage.logic"}
    found = sorted(imports_of(source, "atoll.stage.logic", False, known))
    assert found == [(2, "atoll.dsl.source"), (3, "atoll.dsl.keep"), (4, "atoll.errors"),
                     (6, "atoll._impl.islands.interpreter"), (9, "atoll"), (10, "atoll.stage.ports")]
    assert [unit_of(m) for _, m in found] == ["dsl", "dsl", "errors", "islands", "__init__", "stage"]
