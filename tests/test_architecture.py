"""The architecture drawn from the imports: no cycles, and no app importing one above it.

Apps from the bottom up, one order with no module excused: `kagent` (tenancy, the outbound client, the API's edge),
`guard` (the truthfulness guard: it imports no app), `tools`, `llm` (the model layer), `agents`, `hooks`,
`conversations` (end users, sessions, segments, messages, session events), `runs` (the run), `desk` (tickets and
handoffs: it builds on the conversation and the run, and tells the engine what it needs through
`tools.builtins.DeskFacts`, bound when it is ready, as its built-ins' executors are), `checks` (an agent's checks
and publishing, which runs them: above the run they drive), `dashboard`. An app's modules import only its own and
those of the apps below it, its API edge (`apis`, `urls`) included: a lower app that needs to know something of a
higher one is told through a binding the higher one makes when it is ready (the desk's facts, the agents' grants of
a tool). Imports inside functions count too.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ["kagent", "guard", "tools", "llm", "agents", "hooks", "conversations", "runs", "desk", "checks", "dashboard"]
EDGE_ROOTS = {f"{app}.{leaf}" for app in LAYERS for leaf in ("apis", "urls")} | {"kagent.api_urls"}


def _is_edge(module: str) -> bool:
    """An API module, or a module of an API package (`runs.apis.create`)."""
    return any(module == root or module.startswith(root + ".") for root in EDGE_ROOTS)


def _modules() -> dict[str, Path]:
    found = {}
    for app in LAYERS:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name:
                out.add(name)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, modules) - {name} for name, path in modules.items()}


def test_no_app_imports_an_app_above_it() -> None:
    wrong = []
    for module, imported in _graph().items():
        app = module.split(".")[0]
        if app == "dashboard":
            continue
        for target in imported:
            if LAYERS.index(target.split(".")[0]) > LAYERS.index(app):
                wrong.append(f"{module} -> {target}")
    assert wrong == []


def test_no_import_cycles() -> None:
    graph = _graph()
    # Tarjan's strongly connected components: a component of more than one module is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target.startswith(node + "."):
                continue  # a package's __init__ re-exporting its own modules
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert cycles == []


def test_services_and_selectors_never_import_the_edge() -> None:
    wrong = defaultdict(list)
    for module, imported in _graph().items():
        if _is_edge(module) or module.startswith("dashboard"):
            continue
        for target in imported:
            if _is_edge(target):
                wrong[module].append(target)
    assert dict(wrong) == {}


MAX_MODULE_LINES = 500
MAX_CLASS_LINES = 300


def test_no_module_or_class_outgrows_a_reader() -> None:
    """The house's limits (issue 37): an app module of at most 500 lines, a class of at most 300; a module that grows
    past them is split by its seams, as the engine and the run's services were."""
    too_long = []
    for name, path in _modules().items():
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            too_long.append(f"{name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                size = node.end_lineno - node.lineno + 1
                if size > MAX_CLASS_LINES:
                    too_long.append(f"{name}.{node.name}: {size} lines")
    assert too_long == []
