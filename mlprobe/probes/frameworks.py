"""Installed frameworks, found without importing them: dist-info folders on sys.path (live),
mlprobe-frameworks.json or pip-list.txt (replay). Build flavour from the version's local label
(torch 2.13.0+cpu, +cu130, +rocm6.3) or torch/version.py (cuda / hip)."""

from __future__ import annotations

import re
from typing import Any, Dict, List

from ..errors import ParseError
from ..model.facts import Contribution, FrameworkFacts
from ..scan.capture import Host
from ._util import first_parsed, load_json, nothing_read
from ..model.builds import (FRAMEWORKS as FRAMEWORKS, WANTED, flavour as flavour, normalise as normalise,
                            parse_torch_version_py as parse_torch_version_py)


def parse_frameworks_json(text: str) -> List[Dict[str, Any]]:
    doc = load_json(text, "mlprobe-frameworks.json")
    if not isinstance(doc, list):
        raise ParseError("mlprobe-frameworks.json is not a list")
    return [d for d in doc if isinstance(d, dict) and isinstance(d.get("name"), str)]


def parse_pip_list(text: str) -> List[Dict[str, Any]]:
    """`pip list` (columns) or `pip freeze` (name==version) output."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:==|\s)\s*([0-9][^\s]*)", line)
        if m and not line.startswith(("Package", "---")):
            name = normalise(m.group(1))
            if name in WANTED:
                out.append({"name": name, "version": m.group(2)})
    if not out and not re.search(r"^Package\s+Version", text, re.M) and "==" not in text:
        raise ParseError("not `pip list` or `pip freeze` output")
    return out


def probe(host: Host) -> Contribution:
    out = Contribution()
    system = host.info().get("system")
    errors: List[str] = []
    records = first_parsed(
        host, (("mlprobe-frameworks.json", parse_frameworks_json), ("pip-list.txt", parse_pip_list)), errors
    )
    if records is None:
        return nothing_read(out, errors, "no list of installed packages in this capture")
    for r in records:
        name = normalise(r["name"])
        version = r.get("version")
        out.frameworks.append(FrameworkFacts(
            name=name, version=version,
            flavour=flavour(name, version, r.get("cuda"), r.get("hip"), system),
            cuda=r.get("cuda"), hip=r.get("hip"), location=r.get("location"), source="python",
        ))
    return out
