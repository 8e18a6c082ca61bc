"""Probe registry. A vendor is added by one module here, its row in knowledge/probes.json and one
fixture bundle.

Order matters twice: the scan starts probes in this order (the OpenCL child process first, since it
is the slowest), and GPU observations are merged in this order (the first source to name a field
wins, so vendor tools outrank OpenCL and lspci).
Third parties register more through the `mlprobe.probes` entry-point group (name -> module with a
`probe(host) -> Contribution` function).
"""

from __future__ import annotations

import importlib
import json
import os
from typing import Any, Callable, Dict, List, Tuple

from ..model.facts import Contribution

# The built-in probes and the GPU merge order are data (knowledge/probes.json): a vendor's probe is a
# row there and its module here. Modules are imported lazily, inside the scan's worker threads.
def _table() -> "List[Dict[str, Any]]":
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "knowledge", "probes.json")
    with open(path, "rb") as fh:
        rows: List[Dict[str, Any]] = json.loads(fh.read())["probes"]
    return rows


_ROWS = _table()
# (probe name, module), in the order the scan starts them
PROBES: List[Tuple[str, str]] = [(str(r["name"]), str(r["module"])) for r in _ROWS]
# GPU merge priority: earlier sources win a field.
GPU_SOURCE_ORDER: List[str] = [str(r["name"]) for r in sorted((r for r in _ROWS if r.get("gpu_rank") is not None),
                                                                key=lambda r: int(r["gpu_rank"]))]

ProbeFn = Callable[..., Contribution]


def builtin() -> List[Tuple[str, str]]:
    """Built-in probes. A module that fails to import is reported as that probe's error by
    scan.run_probe, so nothing is looked up here."""
    return list(PROBES)


def plugins() -> List[Tuple[str, str]]:
    """Probes registered by other distributions under the `mlprobe.probes` entry-point group.

    importlib.metadata.entry_points() parses every installed distribution's metadata (45 ms with a
    few hundred packages); only the entry_points.txt files that mention the group are parsed here."""
    import os

    from ._util import sys_path_listing

    out: List[Tuple[str, str]] = []
    for entry, name in sys_path_listing():
        if name.endswith(".dist-info"):
            path = os.path.join(entry, name, "entry_points.txt")
            try:
                with open(path, "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            if b"[mlprobe.probes]" in data:
                out.extend(_parse_group(data.decode("utf-8", "replace"), "mlprobe.probes"))
    return out


def _parse_group(text: str, group: str) -> List[Tuple[str, str]]:
    """`name = module[:attr]` lines of one [group] section of an entry_points.txt."""
    out: List[Tuple[str, str]] = []
    current = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1].strip()
            continue
        if current == group and "=" in line:
            name, _, value = line.partition("=")
            module = value.strip().split(":", 1)[0].strip()
            if name.strip() and module:
                out.append((name.strip(), module))
    return out


def available() -> List[Tuple[str, str]]:
    return builtin() + plugins()


def load(module: str) -> ProbeFn:
    mod = importlib.import_module(module)
    fn = getattr(mod, "probe")
    return fn  # type: ignore[no-any-return]
