# Runs in a child process (python -S path/to/opencl_loader_child.py NAME...): which file the dynamic
# loader opens for each library name (the OpenCL ICD loader, each ICD's library), as one JSON object
# {name: {"path": ..., "error": ...}}. Standard library only; Python 3.7 compatible. A child, because
# loading a vendor's ICD runs its initialisers, which can hang or crash.
from __future__ import annotations

import ctypes
import json
import os
import sys
from typing import Dict, List, Optional


def _maps() -> List[str]:
    paths = []
    try:
        with open("/proc/self/maps", "r") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].startswith("/"):
                    p = parts[5].strip()
                    if p not in paths:
                        paths.append(p)
    except OSError:
        pass
    return paths


def _stem(name: str) -> str:
    base = os.path.basename(name)
    return base.split(".so")[0] if ".so" in base else base


def resolve(name: str) -> Dict[str, Optional[str]]:
    before = set(_maps())
    try:
        ctypes.CDLL(name, mode=getattr(os, "RTLD_LAZY", 1) | getattr(os, "RTLD_LOCAL", 0))
    except OSError as exc:
        return {"path": None, "error": str(exc)[:300]}
    after = _maps()
    stem = _stem(name)
    new = [p for p in after if p not in before]
    for pool in (new, after):
        for p in pool:
            if os.path.basename(p).startswith(stem + ".so") or os.path.basename(p) == os.path.basename(name):
                return {"path": p, "error": None}
    return {"path": new[0] if new else None, "error": None}


def main(argv: List[str]) -> int:
    out: Dict[str, Dict[str, Optional[str]]] = {}
    for name in argv[1:]:
        if name not in out:
            out[name] = resolve(name)
    sys.stdout.write(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
