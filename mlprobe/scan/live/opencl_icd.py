"""The OpenCL loader facts of this machine, as the `opencl-icd.json` capture: which file the dynamic
loader opens for `libOpenCL.so.1` and `libOpenCL.so` (the library search path applies), the ICD files
of the vendors folder (`OCL_ICD_VENDORS`, else /etc/OpenCL/vendors) with the library each names and
whether it loads, and the libraries `OCL_ICD_FILENAMES` names. Loading is done in a child process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping

from ..capture import Capture, CaptureSpec, read_regular, UnreadableFile
from .proc import run_argv

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "opencl_loader_child.py")
LOADER_NAMES = ("libOpenCL.so.1", "libOpenCL.so")
DEFAULT_VENDORS = "/etc/OpenCL/vendors"
MAX_ICDS = 64


def _icd_files(folder: str) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".icd"))[:MAX_ICDS]
    except OSError:
        return out
    for n in names:
        path = os.path.join(folder, n)
        try:
            text = read_regular(path, 4096).decode("utf-8", "replace").strip()
        except (OSError, UnreadableFile) as exc:
            out.append({"file": path, "library": None, "error": str(exc)[:200]})
            continue
        out.append({"file": path, "library": text.splitlines()[0].strip() if text else ""})
    return out


def live_opencl_icd(s: CaptureSpec, env: Mapping[str, str]) -> Capture:
    vendors_env = env.get("OCL_ICD_VENDORS")
    folder = vendors_env or DEFAULT_VENDORS
    doc: Dict[str, Any] = {
        "OCL_ICD_VENDORS": vendors_env, "OCL_ICD_FILENAMES": env.get("OCL_ICD_FILENAMES"),
        "vendors_dir": folder, "vendors_dir_exists": Path(folder).is_dir(),
        "icd_files": _icd_files(folder) if Path(folder).is_dir() else [],
        "filenames": [{"library": n.strip()} for n in (env.get("OCL_ICD_FILENAMES") or "").split(":") if n.strip()],
    }
    names = list(LOADER_NAMES) + [r["library"] for r in doc["icd_files"] + doc["filenames"] if r.get("library")]
    try:
        rc, out, err = run_argv([sys.executable, "-S", CHILD, *names], s.timeout, dict(env))
        resolved = json.loads(out.decode("utf-8", "replace")) if rc == 0 else None
    except subprocess.TimeoutExpired:
        resolved, doc["error"] = None, f"loading the OpenCL libraries did not finish within {s.timeout:g} s"
    except (OSError, ValueError) as exc:
        resolved, doc["error"] = None, f"the loader child failed: {exc}"
    if resolved is None and "error" not in doc:
        doc["error"] = f"the loader child exited with status {rc}: {err.decode('utf-8', 'replace').strip()[-200:]}"
    got = resolved if isinstance(resolved, dict) else {}
    doc["loader"] = [dict({"name": n}, **(got.get(n) or {"path": None})) for n in LOADER_NAMES]
    for row in doc["icd_files"] + doc["filenames"]:
        if row.get("library") and isinstance(got.get(row["library"]), dict):
            row.update(got[row["library"]])
    return Capture(s.name, "ok", data=json.dumps(doc, indent=2, sort_keys=True).encode())
