"""The knowledge tables (mlprobe/knowledge/<stem>.json), read once and shared by the probes and the
rules, plus the lookups over them that both sides ask: the CUDA version a driver supports and the
NVIDIA product-name table. Loading is lazy and cached; a missing or half-written table costs its
lookups, never the scan (tests/test_recipes.py checks every shipped table)."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

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


class Row:
    """One JSON object of mlprobe's own data, read where it is used: a knowledge-table row, a table, a
    recipe's condition. `get` gives the raw JSON value (an `object` the caller narrows); the typed
    readers give what a row's author meant (`text` is the value as text, as the sentences print it)."""

    __slots__ = ("doc", "_kids")

    def __init__(self, doc: object = None) -> None:
        self.doc: Mapping[str, object] = doc if type(doc) is dict or isinstance(doc, Mapping) else {}
        self._kids: Optional[Dict[str, Tuple["Row", ...]]] = None  # rows(key), made once (conditions are read often)

    def __contains__(self, key: str) -> bool:
        return key in self.doc

    def __getitem__(self, key: str) -> object:
        return self.doc[key]

    def __repr__(self) -> str:
        return f"Row({dict(self.doc)!r})"

    def __bool__(self) -> bool:
        return bool(self.doc)

    def get(self, key: str, default: object = None) -> object:
        return self.doc.get(key, default)

    def keys(self) -> Iterable[str]:
        return self.doc.keys()

    def text(self, key: str, default: Optional[str] = None) -> Optional[str]:
        """The value as text (a number as its digits); `default` when it is missing or null."""
        v = self.doc.get(key)
        return default if v is None else str(v)

    def string(self, key: str) -> Optional[str]:
        """The value when it is a string, else None."""
        v = self.doc.get(key)
        return v if isinstance(v, str) else None

    def texts(self, key: str) -> Tuple[str, ...]:
        """A list's items as text; () when it is not a list."""
        v = self.doc.get(key)
        return tuple(str(x) for x in v) if isinstance(v, list) else ()

    def integer(self, key: str) -> Optional[int]:
        v = self.doc.get(key)
        if isinstance(v, bool):
            return int(v)
        if isinstance(v, (int, float)):
            return int(v)
        if isinstance(v, str) and v.strip().lstrip("-").isdigit():
            return int(v)
        return None

    def flag(self, key: str) -> bool:
        return bool(self.doc.get(key))

    def row(self, key: str) -> "Row":
        """An object inside this one; an empty Row when it is missing or not an object."""
        kids = self._kids
        if kids is None:
            kids = self._kids = {}
        found = kids.get("\0" + key)  # kept beside rows(key), under a key no JSON key starts with
        if found is None:
            found = kids["\0" + key] = (Row(self.doc.get(key)),)
        return found[0]

    def rows(self, key: str) -> Tuple["Row", ...]:
        """A list of objects inside this one (its other items left out); () when it is not a list."""
        kids = self._kids
        if kids is None:
            kids = self._kids = {}
        found = kids.get(key)
        if found is None:
            v = self.doc.get(key)
            found = kids[key] = tuple(Row(x) for x in v if type(x) is dict or isinstance(x, Mapping)) \
                if isinstance(v, list) else ()
        return found


class Knowledge:
    """The knowledge tables (knowledge/<stem>.json) as Rows, each read on first use (big tables cost
    nothing unless asked) and shared."""

    __slots__ = ()

    def table(self, stem: str) -> Row:
        """knowledge/<stem>.json; an empty Row when it cannot be read."""
        return _table_row(stem)

    def rows(self, stem: str, key: str = "rows") -> Tuple[Row, ...]:
        """The list `key` of a table, its objects only."""
        return _table_rows(stem, key)

    def at(self, ref: str) -> Tuple[Row, ...]:
        """The rows a recipe names as "stem.key" (`torch_wheels.cuda`)."""
        stem, _, key = ref.partition(".")
        return _table_rows(stem, key)


@lru_cache(maxsize=None)
def _table_row(stem: str) -> Row:
    return Row(load(stem))


@lru_cache(maxsize=None)
def _table_rows(stem: str, key: str) -> Tuple[Row, ...]:
    return _table_row(stem).rows(key)


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
    toolkit_rows: Iterable[Mapping[str, Any]], driver: Any, column: str, infer_windows: bool = False
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
        if not isinstance(row, Mapping) or not row.get("cuda"):
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


__all__ = ["KNOWLEDGE_DIR", "Knowledge", "Row", "load", "newest_cuda", "nvidia_name_row", "rows", "stems", "table", "version"]
