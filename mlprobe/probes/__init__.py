"""Probe registry. A vendor is added by one module here and one fixture bundle.

Order matters twice: the scan starts probes in this order (the OpenCL child process first, since it
is the slowest), and GPU observations are merged in this order (the first source to name a field
wins, so vendor tools outrank OpenCL and lspci).
Third parties register more through the `mlprobe.probes` entry-point group (name -> module with a
`probe(host) -> Contribution` function).
"""

from __future__ import annotations

import importlib
from typing import Callable, List, Tuple

from ..model.facts import Contribution

# (probe name, module). Modules are imported lazily, inside the scan's worker threads.
PROBES: List[Tuple[str, str]] = [
    ("opencl", "mlprobe.probes.opencl"),
    ("nvidia", "mlprobe.probes.nvidia"),
    ("jetson", "mlprobe.probes.jetson"),
    ("rocm", "mlprobe.probes.rocm"),
    ("apple", "mlprobe.probes.apple"),
    ("windows", "mlprobe.probes.windows"),
    ("intel", "mlprobe.probes.intel"),
    ("ascend", "mlprobe.probes.ascend"),
    ("pci", "mlprobe.probes.pci"),
    ("usb", "mlprobe.probes.usb"),
    ("collect_env", "mlprobe.probes.collect_env"),
    ("cpu", "mlprobe.probes.cpu"),
    ("os", "mlprobe.probes.os_"),
    ("python", "mlprobe.probes.python"),
    ("memory", "mlprobe.probes.memory"),
    ("frameworks", "mlprobe.probes.frameworks"),
]

# GPU merge priority: earlier sources win a field.
GPU_SOURCE_ORDER = ["nvidia", "jetson", "rocm", "apple", "windows", "intel", "ascend", "collect_env", "pci",
                    "opencl"]

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
