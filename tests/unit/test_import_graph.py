"""Every first-party package is acyclic: no module depends, however indirectly, on itself.

A cycle means two modules can be neither understood, tested nor moved apart, and it is
how layers erode: "only under TYPE_CHECKING" or "only inside a function" today is a
shared type that wants a module of its own tomorrow. So the graph holds every import
grimp finds, those inside functions and under TYPE_CHECKING included, and any strongly
connected component of more than one module fails, naming its modules and one import
chain around it to start untangling from.

A package `__init__` that re-exports its submodules is no cycle by itself: grimp records
explicit imports only, not Python's implicit "importing a.b runs a/__init__ first". A
submodule that imports its own package back (`from cascade_planner import X` while the
`__init__` imports that submodule) is one, and is reported like any other.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import grimp
import networkx as nx
import pytest

REPO = Path(__file__).resolve().parents[2]

# The component roots (top-level folder -> import name); a new one must be added here.
ROOTS = (
    "cascade_api",
    "cascade_protocol",
    "cascade_autoscaler",
    "cascade_sim",
    "cascade_operator",
    "cascade_worker",
    "cascade_gateway",
    "cascade_dev",
    "cascade_cli",
    "cascade_bench",
    "cascade_planner",
)


def _component_folders() -> dict[str, Path]:
    """Import name -> the folder that holds it, for every root package in the repo."""
    return {p.parent.name: p.parent.parent for p in REPO.glob("*/cascade_*/__init__.py")}


@pytest.fixture(scope="module")
def graph() -> Iterator[grimp.ImportGraph]:
    """One graph of all roots; a root the environment cannot import yet is found in its
    folder (a package added since the last `make setup`)."""
    folders = _component_folders()
    with pytest.MonkeyPatch.context() as mp:
        for folder in sorted({folders[r] for r in ROOTS if r in folders}):
            if str(folder) not in sys.path:
                mp.syspath_prepend(str(folder))
        yield grimp.build_graph(*ROOTS, cache_dir=None)


def _package_graph(graph: grimp.ImportGraph, root: str) -> nx.DiGraph[str]:
    """The imports between modules of `root` (edges to other packages dropped)."""
    g: nx.DiGraph[str] = nx.DiGraph()
    mine = {m for m in graph.modules if m == root or m.startswith(root + ".")}
    g.add_nodes_from(mine)
    for m in mine:
        g.add_edges_from((m, d) for d in graph.find_modules_directly_imported_by(m) if d in mine)
    return g


def _chain(graph: grimp.ImportGraph, g: nx.DiGraph[str], component: set[str]) -> str:
    """One cycle through `component`, each step with the line that makes it."""
    steps = []
    for importer, imported in nx.find_cycle(g.subgraph(component)):
        detail = graph.get_import_details(importer=importer, imported=imported)
        where = f"{importer}:{detail[0]['line_number']}" if detail else importer
        line = f"  `{detail[0]['line_contents']}`" if detail else ""
        steps.append(f"    {where}{line}\n      -> {imported}")
    return "\n".join(steps)


def test_roots_list_every_component() -> None:
    assert sorted(_component_folders()) == sorted(ROOTS)


@pytest.mark.parametrize("root", ROOTS)
def test_package_has_no_import_cycle(graph: grimp.ImportGraph, root: str) -> None:
    g = _package_graph(graph, root)
    cycles = sorted(
        (sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1),
        key=lambda c: c[0],
    )
    report = [f"  {', '.join(c)}\n{_chain(graph, g, set(c))}" for c in cycles]
    assert not cycles, f"{root}: {len(cycles)} import cycle(s):\n" + "\n".join(report)


def test_packages_do_not_depend_on_each_other_in_a_cycle(graph: grimp.ImportGraph) -> None:
    """Between root packages too, dependencies run one way (e.g. worker -> protocol)."""
    g: nx.DiGraph[str] = nx.DiGraph()
    for m in graph.modules:
        for d in graph.find_modules_directly_imported_by(m):
            a, b = m.split(".")[0], d.split(".")[0]
            if a != b:
                g.add_edge(a, b, via=f"{m} -> {d}")
    cycles = [sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1]
    report = [
        ", ".join(c) + ": " + "; ".join(g.edges[e]["via"] for e in nx.find_cycle(g.subgraph(c)))
        for c in cycles
    ]
    assert not cycles, "root packages in a cycle:\n  " + "\n  ".join(report)


WORKER_ROOT_MODULES = 6  # __init__, main and the few modules every layer may use


def test_the_worker_root_shows_its_layers_not_a_heap_of_modules() -> None:
    """The worker's modules live in its layer packages (contract `worker-layers`); its
    root keeps the entry point and what sits beside every layer (config, timeline, ...)."""
    root = _component_folders()["cascade_worker"] / "cascade_worker"
    modules = sorted(p.name for p in root.glob("*.py"))
    assert len(modules) <= WORKER_ROOT_MODULES, modules
