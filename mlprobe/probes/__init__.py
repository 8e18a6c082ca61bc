"""Probe registry. A vendor is added by one module here and one fixture bundle.

Order matters twice: the scan starts probes in this order (the OpenCL child process first, since it
is the slowest), and GPU observations are merged in this order (the first source to name a field
wins, so vendor tools outrank OpenCL and lspci).
Third parties register more through the `mlprobe.probes` entry-point group (name -> module with a
`probe(host) -> Contribution` function).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Callable, List, Tuple

from ..facts import Contribution

# (probe name, module). Modules are imported lazily, inside the scan's worker threads.
PROBES: List[Tuple[str, str]] = [
    ("opencl", "mlprobe.probes.opencl"),
    ("nvidia", "mlprobe.probes.nvidia"),
    ("rocm", "mlprobe.probes.rocm"),
    ("apple", "mlprobe.probes.apple"),
    ("windows", "mlprobe.probes.windows"),
    ("intel", "mlprobe.probes.intel"),
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
GPU_SOURCE_ORDER = ["nvidia", "rocm", "apple", "windows", "intel", "collect_env", "pci", "opencl"]

ProbeFn = Callable[..., Contribution]


def builtin() -> List[Tuple[str, str]]:
    """Built-in probes whose module exists (a vendor module may be missing in a trimmed build)."""
    return [(name, module) for name, module in PROBES if importlib.util.find_spec(module) is not None]


def plugins() -> List[Tuple[str, str]]:
    """Probes registered by other distributions under the `mlprobe.probes` entry-point group."""
    out: List[Tuple[str, str]] = []
    try:
        from importlib.metadata import entry_points

        eps = entry_points()
        group = eps.select(group="mlprobe.probes") if hasattr(eps, "select") else eps.get("mlprobe.probes", [])
        for ep in group:
            out.append((ep.name, ep.value))
    except Exception:  # a broken third-party entry point must not stop the scan
        pass
    return out


def available() -> List[Tuple[str, str]]:
    return builtin() + plugins()


def load(module: str) -> ProbeFn:
    mod = importlib.import_module(module)
    fn = getattr(mod, "probe")
    return fn  # type: ignore[no-any-return]
