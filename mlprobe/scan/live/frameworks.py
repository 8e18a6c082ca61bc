"""The installed frameworks of the running interpreter: dist-info folders on sys.path (a directory
listing each, no imports), as the `mlprobe-frameworks.json` capture."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Tuple

from ...probes._util import sys_path_listing
from ...model.builds import DIST_RE, WANTED, FRAMEWORKS, normalise, parse_torch_version_py


def installed_distributions() -> List[Tuple[str, str]]:
    """(name, version) of every distribution on sys.path, the first of each name (as Python imports
    it), sorted by name: a directory listing each, no imports."""
    found: Dict[str, Tuple[str, str]] = {}
    for _entry, fn in sys_path_listing():
        m = DIST_RE.match(fn)
        if m:
            found.setdefault(normalise(m.group("name")), (m.group("name"), m.group("version")))
    return [found[k] for k in sorted(found)]


def live_inventory() -> List[Dict[str, Any]]:
    """Scan sys.path for the dist-info of known frameworks (a directory listing each, no imports)."""
    found: Dict[str, Dict[str, Any]] = {}
    for entry, fn in sys_path_listing():
        m = DIST_RE.match(fn)
        if not m:
            continue
        name = normalise(m.group("name"))
        if name not in WANTED or name in found:
            continue
        rec: Dict[str, Any] = {"name": name, "version": m.group("version"), "location": entry}
        if name == "torch":
            try:
                with open(os.path.join(entry, "torch", "version.py"), encoding="utf-8") as fh:
                    rec.update({k: v for k, v in parse_torch_version_py(fh.read()).items()
                                if k in ("cuda", "hip")})
            except OSError:
                pass
        found[name] = rec
    return [found[n] for n in FRAMEWORKS if n in found]
