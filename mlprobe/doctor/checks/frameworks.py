"""Doctor checks: the frameworks' own answer (the device list each framework printed in a child)."""

from __future__ import annotations

from typing import Any, Optional

from ...model import shell
from ...model.doctor import Evidence
from ...model.knowledge import Row
from ..context import DoctorContext
from ._base import Hit, Result, Unknown, check

# -- the frameworks' own answer


def _expected_gpu(dc: DoctorContext, fw: Any) -> Optional[str]:
    """The kind of GPU device a framework's build should list on this machine, or None."""
    info = fw.info
    if fw.name == "torch":
        if info.get("hip") and dc.gpus("amd"):
            return "ROCm"
        if info.get("cuda") and dc.gpus("nvidia"):
            return "CUDA"
    if fw.name == "tensorflow" and info.get("built_with_cuda") and dc.gpus("nvidia"):
        return "GPU"
    if fw.name == "jax":
        plugins = " ".join(info.get("plugins") or {}) if isinstance(info.get("plugins"), dict) else ""
        if "cuda" in plugins and dc.gpus("nvidia"):
            return "CUDA"
        if "rocm" in plugins and dc.gpus("amd"):
            return "ROCm"
    return None


@check("framework_sees_no_gpu")
def framework_sees_no_gpu(dc: DoctorContext, row: Row) -> Result:
    if dc.enumeration is None:
        return Unknown(dc.enumeration_note or "no framework-devices.json in the capture")
    out = []
    for fw in dc.enumeration.frameworks:
        kind = _expected_gpu(dc, fw)
        if kind is None or fw.gpus() or fw.error:
            continue
        reason = next((str(u.get("reason")) for u in fw.unavailable if u.get("reason")), "no reason given")
        py = f" --python {shell.posix([dc.python])}" if dc.python else ""
        fix = ("fix the blocking findings above first" if any(f.severity == "blocking" for f in getattr(dc, "found", []))
               else f"mlprobe verify --framework {shell.posix([fw.name])}{py} -v  # the framework's own error, in full")
        out.append(Hit({"name": fw.name, "version": fw.version or "?", "kind": kind, "reason": reason, "fix": fix},
                       [Evidence(capture=dc.enumeration.source, line=reason)]))
    return out


@check("framework_enumeration_failed")
def framework_enumeration_failed(dc: DoctorContext, row: Row) -> Result:
    if dc.enumeration is None:
        return []
    py = f" --python {shell.posix([dc.python])}" if dc.python else ""
    out = [Hit({"name": fw.name, "error": fw.error, "fix": f"mlprobe verify --framework {shell.posix([fw.name])}{py} -v"},
               [Evidence(capture=dc.enumeration.source, line=str(fw.error))])
           for fw in dc.enumeration.frameworks if fw.error]
    if dc.enumeration.error:
        out.append(Hit({"name": "the interpreter", "error": dc.enumeration.error,
                        "fix": "check that it is a working Python 3.7 or newer"},
                       [Evidence(capture=dc.enumeration.source, line=dc.enumeration.error)]))
    return out


@check("framework_sees_gpu")
def framework_sees_gpu(dc: DoctorContext, row: Row) -> Result:
    if dc.enumeration is None:
        return []
    out = []
    for fw in dc.enumeration.frameworks:
        gpus = fw.gpus()
        if gpus:
            shown = ", ".join(f"{d.get('id')} {d.get('name') or ''}".strip() for d in gpus[:4])
            out.append(Hit({"name": fw.name, "version": fw.version or "?", "devices": shown},
                           [Evidence(capture=dc.enumeration.source, line=shown)]))
    return out
