"""Subset matching of a scan report against a fixture's ground truth (see fixtures/README.md)."""

from __future__ import annotations

from typing import Any, List


def mismatches(expected: Any, actual: Any, path: str = "") -> List[str]:
    out: List[str] = []
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path}: expected an object, got {actual!r}"]
        for key, exp in expected.items():
            here = f"{path}.{key}" if path else key
            if key == "flags_include":
                missing = [f for f in exp if f not in actual.get("flags", [])]
                if missing:
                    out.append(f"{here}: missing flags {missing}")
            elif key == "flags_exclude":
                extra = [f for f in exp if f in actual.get("flags", [])]
                if extra:
                    out.append(f"{here}: unexpected flags {extra}")
            elif key == "apis_include":
                missing = [a for a in exp if a not in actual.get("apis", [])]
                if missing:
                    out.append(f"{here}: missing apis {missing}")
            elif key in ("gpus", "usb_accelerators", "core_types") and isinstance(exp, list):
                out.extend(_match_unordered(exp, actual.get(key, []), here, exact_count=True))
            elif key == "frameworks_include":
                out.extend(_match_unordered(exp, actual.get("frameworks", []), here, exact_count=False))
            elif key == "gpu_count_at_least":
                if len(actual.get("gpus", [])) < exp:
                    out.append(f"{here}: {len(actual.get('gpus', []))} gpus < {exp}")
            elif key in ("plan", "doctor"):
                continue  # checked by the plan tests and tests/test_doctor.py
            elif key == "platforms" and isinstance(exp, list):
                out.extend(_match_unordered(exp, actual.get(key, []), here, exact_count=False))
            else:
                if key not in actual:
                    out.append(f"{here}: missing")
                else:
                    out.extend(mismatches(exp, actual[key], here))
        return out
    if expected != actual:
        return [f"{path}: expected {expected!r}, got {actual!r}"]
    return out


def _match_unordered(expected: List[Any], actual: List[Any], path: str, exact_count: bool) -> List[str]:
    out: List[str] = []
    if exact_count and len(expected) != len(actual):
        names = [a.get("name") if isinstance(a, dict) else a for a in actual]
        out.append(f"{path}: expected {len(expected)} entries, got {len(actual)}: {names}")
    used: set[int] = set()
    for i, exp in enumerate(expected):
        best = None
        for j, act in enumerate(actual):
            if j in used:
                continue
            errs = mismatches(exp, act, f"{path}[{i}]")
            if not errs:
                best = j
                break
        if best is None:
            # report against the closest candidate
            cands = [mismatches(exp, act, f"{path}[{i}]") for j, act in enumerate(actual) if j not in used]
            cands.sort(key=len)
            out.extend(cands[0] if cands else [f"{path}[{i}]: no candidate for {exp}"])
        else:
            used.add(best)
    return out
