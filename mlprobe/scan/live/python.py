"""Facts about the running interpreter that only Python can tell (stored in host.json)."""

from __future__ import annotations

import os
import sys
from typing import Any, Dict

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
