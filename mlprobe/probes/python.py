"""Python: version, implementation, platform tags, venv, externally managed (PEP 668)."""

from __future__ import annotations

import os
import sys
from typing import Any, Dict

from ..facts import Contribution, PythonFacts
from ..host import Host

MAX_TAGS = 8


def live_python_extras() -> Dict[str, Any]:
    """Facts about the running interpreter that only Python can tell; stored in host.json."""
    import sysconfig

    extras: Dict[str, Any] = {}
    try:
        from packaging import tags

        seen = []
        for tag in tags.sys_tags():
            s = str(tag)
            if s not in seen:
                seen.append(s)
            if len(seen) >= MAX_TAGS:
                break
        extras["python_tags"] = seen
    except Exception:
        extras["python_tags"] = []
    # PEP 668: an EXTERNALLY-MANAGED file in the stdlib directory, unless inside a venv.
    in_venv = sys.prefix != getattr(sys, "base_prefix", sys.prefix)
    marker = os.path.join(sysconfig.get_path("stdlib") or "", "EXTERNALLY-MANAGED")
    extras["externally_managed"] = (not in_venv) and os.path.isfile(marker)
    return extras


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
