"""The house rules of the layout (docs/agent.md, "Layout"): dependencies point down."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "memroute"
FACES = ("memroute.agent", "memroute.retriever", "memroute.tools", "memroute.cli",
         "memroute.server_graph", "memroute.demo", "memroute.evals", "memroute.service")

# layer -> the memroute modules it must never import
FORBIDDEN = {
    "memory": ("memroute.strategies", "memroute.planners", "memroute.graph", *FACES),
    "strategies": ("memroute.planners", "memroute.graph", *FACES),
    "planners": ("memroute.graph", *FACES),
    "graph": FACES,
    # a question's reading is read by the graph and every planner: it imports neither
    "reading": ("memroute.planners", "memroute.graph", *FACES),
    "time": ("memroute.memory", "memroute.strategies", "memroute.planners", "memroute.graph",
             *FACES),
}


def imported_modules(path: Path) -> set[str]:
    """Every absolute module a file imports (``from a.b import c`` also counts ``a.b.c``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_imported_modules_sees_both_import_forms(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("import memroute.graph.state\nfrom memroute import agent\n")
    assert {"memroute.graph.state", "memroute.agent"} <= imported_modules(source)


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_nothing_above_it(layer: str) -> None:
    offending = []
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        for module in imported_modules(path):
            if any(module == bad or module.startswith(bad + ".") for bad in FORBIDDEN[layer]):
                offending.append(f"{path.relative_to(PACKAGE.parent)} imports {module}")
    assert not offending, "\n".join(offending)
