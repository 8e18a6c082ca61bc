"""The import graph, built from the code: no circle, and no module imports from a layer above its
own. Imports inside functions and under TYPE_CHECKING count too (a lazy import is still a
dependency). Layers, lowest first; a module belongs to the first layer with a prefix that names it."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

PACKAGE = Path(__file__).resolve().parent.parent / "mlprobe"

LAYERS: List[List[str]] = [
    # vocabulary, typed contracts, knowledge tables, plain helpers: no stage imported
    ["mlprobe", "mlprobe.errors", "mlprobe.ui", "mlprobe.urls", "mlprobe.schema", "mlprobe.model",
     "mlprobe.shims", "mlprobe.venvconf"],
    ["mlprobe.scan.capture"],  # capture names, Capture, the Host protocol
    ["mlprobe.probes"],  # parse captures into facts; never touch the machine
    ["mlprobe.scan.live", "mlprobe.scan.host"],  # the machine (or a bundle) behind the Host protocol
    ["mlprobe.scan"],  # run the probes, merge their facts
    ["mlprobe.recipes", "mlprobe.plan"],  # facts + recipe data -> plan
    ["mlprobe.verify"],
    ["mlprobe.doctor"],  # the rules over the scan, the plan and the frameworks' own enumeration
    ["mlprobe.install", "mlprobe.export"],
    ["mlprobe.render"],
    ["mlprobe.report"],
    ["mlprobe.pipeline"],  # scan -> plan -> install -> verify -> report, composed once
    # the commands; a fleet runs the commands' own scan (host choice, report) on each node
    ["mlprobe.commands", "mlprobe.cli", "mlprobe.__main__", "mlprobe.fleet"],
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def import_graph() -> Dict[str, Set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: Dict[str, Set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: Set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                candidates = [f"{target}.{a.name}" for a in node.names] + [target]
            elif isinstance(node, ast.Import):
                candidates = [a.name for a in node.names]
            else:
                continue
            # `from . import probes` imports the module mlprobe.probes, not the package mlprobe
            hit = next((c for c in candidates if c in modules), None)
            if hit and hit != name:
                found.add(hit)
        graph[name] = found
    return graph


def layer_of(module: str) -> int:
    best, best_len = -1, -1
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = i, len(prefix)
    assert best >= 0, f"{module} is in no layer: add it to LAYERS in tests/test_layers.py"
    return best


def test_every_module_has_a_layer() -> None:
    for module in import_graph():
        layer_of(module)


def test_no_import_from_a_higher_layer() -> None:
    upward = [
        f"{m} (layer {layer_of(m)}) imports {t} (layer {layer_of(t)})"
        for m, targets in sorted(import_graph().items())
        for t in sorted(targets)
        if layer_of(t) > layer_of(m)
    ]
    assert not upward, "\n".join(upward)


def test_no_import_circle() -> None:
    graph = import_graph()
    state: Dict[str, int] = {}
    stack: List[str] = []
    circles: List[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                circles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not circles, "\n".join(circles)


def test_the_graph_sees_a_known_import() -> None:
    """The graph is read from the code: the scan runs the probes through their registry."""
    assert "mlprobe.probes" in import_graph()["mlprobe.scan.run"]


CLI_LAYER = ("mlprobe.commands", "mlprobe.cli", "mlprobe.__main__", "mlprobe.errors")
CLI_NAMES = {"MlprobeError", "EXIT_OK", "EXIT_FAILURE", "EXIT_USAGE", "EXIT_UNAVAILABLE", "EXIT_INTERRUPTED"}


def _cli_names_used(path: Path) -> Set[str]:
    found: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Name) and node.id in CLI_NAMES:
            found.add(node.id)
        elif isinstance(node, ast.Attribute) and node.attr in CLI_NAMES:
            found.add(node.attr)
        elif isinstance(node, ast.ImportFrom):
            found.update(a.name for a in node.names if a.name in CLI_NAMES)
    return found


def test_only_the_command_layer_speaks_of_exit_codes_and_cli_errors() -> None:
    """Library code raises narrow errors (LibraryError, StageError with a kind); the command layer
    alone turns them into MlprobeError and exit statuses (commands/advice.py)."""
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _module_name(path)
        if any(name == p or name.startswith(p + ".") for p in CLI_LAYER):
            continue
        used = _cli_names_used(path)
        if used:
            offenders[name] = sorted(used)
    assert offenders == {}


def test_the_cli_name_check_sees_a_known_use() -> None:
    assert "MlprobeError" in _cli_names_used(PACKAGE / "commands" / "advice.py")
    assert "EXIT_USAGE" in _cli_names_used(PACKAGE / "cli.py")


MAX_MODULE_LINES = 700


def test_no_module_is_over_700_lines() -> None:
    """A module past 700 lines holds more than one job: split it by job (doctor/checks/, the probes'
    *_data/*_smi/*_wmi helpers, install/preflight.py)."""
    long = {str(p.relative_to(PACKAGE)): n for p in sorted(PACKAGE.rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_no_probe_imports_another_probe() -> None:
    """Probes share knowledge through model/ (model/hw, model/builds) and text readers through their
    helper modules (_util, cpu_lscpu, nvidia_data, ...), never through another registered probe."""
    from mlprobe.probes import PROBES

    probes = {module for _name, module in PROBES}
    graph = import_graph()
    crossing = {m: sorted(t for t in graph[m] if t in probes) for m in sorted(probes)}
    assert {m: t for m, t in crossing.items() if t} == {}
    assert "mlprobe.model.hw.amd" in graph["mlprobe.probes.pci"]  # the graph sees the shared knowledge
