"""The knowledge tables (mlprobe/knowledge/<stem>.json), read once and shared by the probes and the
rules, plus the lookups over them that both sides ask: the CUDA version a driver supports and the
NVIDIA product-name table. Loading is lazy and cached; a missing or half-written table costs its
lookups, never the scan (tests/test_recipes.py checks every shipped table)."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

from packaging.version import InvalidVersion, Version

KNOWLEDGE_DIR = Path(__file__).resolve().parent.parent / "knowledge"


@lru_cache(maxsize=None)
def load(stem: str) -> Optional[Dict[str, Any]]:
    """knowledge/<stem>.json as a dict; None when it is missing, unreadable or not a JSON object."""
    try:
        doc = json.loads((KNOWLEDGE_DIR / f"{stem}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def table(stem: str) -> Dict[str, Any]:
    """knowledge/<stem>.json, or {} when it cannot be read."""
    return load(stem) or {}


def rows(stem: str, key: str = "rows") -> List[Dict[str, Any]]:
    """The list `key` of a table, dict rows only."""
    found = table(stem).get(key)
    return [r for r in found if isinstance(r, dict)] if isinstance(found, list) else []


def stems() -> List[str]:
    return sorted(p.stem for p in KNOWLEDGE_DIR.glob("*.json"))


def version(text: Any) -> Optional[Version]:
    """A version from text that may carry a suffix ("560.94 (beta)"): packaging's reading, else its
    leading dotted numbers; None when there are none."""
    if text is None:
        return None
    return _version(str(text))


@lru_cache(maxsize=1024)
def _version(text: str) -> Optional[Version]:
    try:
        return Version(text)
    except InvalidVersion:
        m = re.match(r"^\s*(\d+(?:\.\d+)*)", text)
        return Version(m.group(1)) if m else None


def newest_cuda(
    toolkit_rows: Iterable[Dict[str, Any]], driver: Any, column: str, infer_windows: bool = False
) -> Optional[str]:
    """The newest CUDA toolkit whose bundled driver (nvidia_gpus.json `cuda_toolkit_min_driver`, in
    ascending order) is not newer than `driver`: what nvidia-smi's "CUDA Version" says. `column` is
    "linux" or "windows". Where a row has no number for the column and the driver met the row before,
    the answer is unknowable: None; with `infer_windows` a missing Windows number is the Linux one of
    the same branch instead [inference: Windows and Linux drivers of one branch share the major number]."""
    have = version(driver)
    if have is None:
        return None
    best: Optional[str] = None
    met_previous = False
    for row in toolkit_rows:
        if not isinstance(row, dict) or not row.get("cuda"):
            continue
        raw = row.get(column)
        if raw is None and infer_windows and column == "windows":
            raw = row.get("linux")
        need = version(raw)
        if need is None:
            if met_previous:
                return None
            continue
        met_previous = have >= need
        if met_previous and (best is None or version(row["cuda"]) > version(best)):  # type: ignore[operator]
            best = str(row["cuda"])
    return best


def nvidia_name_row(name_rows: Iterable[Dict[str, Any]], name: Optional[str]) -> Optional[Dict[str, Any]]:
    """The first row of nvidia_gpus.json `compute_capability_by_name` whose pattern matches an NVIDIA
    product name (case-insensitive; underscores and runs of spaces read as one space)."""
    if not name:
        return None
    clean = " ".join(name.replace("_", " ").split())
    for row in name_rows:
        try:
            if re.search(str(row["pattern"]), clean, re.I):
                return row
        except (KeyError, re.error):
            continue
    return None


__all__ = ["KNOWLEDGE_DIR", "load", "newest_cuda", "nvidia_name_row", "rows", "stems", "table", "version"]
