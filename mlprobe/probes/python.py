"""Python: version, implementation, platform tags, venv, externally managed (PEP 668)."""

from __future__ import annotations


from ..model.facts import Contribution, PythonFacts
from ..scan.capture import Host


def probe(host: Host) -> Contribution:
    info = host.info()
    out = Contribution()
    version = info.get("python_version")
    if not version:
        out.status = "absent"
        out.error = "no Python interpreter facts in this capture"
        return out
    tags = info.get("python_tags")
    out.python = PythonFacts(
        version=str(version),
        implementation=info.get("python_implementation"),
        executable=info.get("python_executable"),
        in_venv=info.get("in_venv"),
        externally_managed=info.get("externally_managed"),
        platform_tags=tuple(str(t) for t in tags) if isinstance(tags, list) else (),
        machine=info.get("machine"),
    )
    return out
