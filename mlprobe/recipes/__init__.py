"""The recipe catalog (one JSON file per recipe, checked against recipe.schema.json in the tests) and
the knowledge tables in mlprobe/knowledge/*.json. Loading is lazy and cached; at run time only a light
structural check runs (jsonschema is a test dependency)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping

from ..model import knowledge as kb

RECIPES_DIR = Path(__file__).resolve().parent
KNOWLEDGE_DIR = kb.KNOWLEDGE_DIR
SCHEMA_FILE = RECIPES_DIR / "recipe.schema.json"

FRAMEWORKS = ("torch", "tensorflow", "keras", "neon", "caffe")
BACKENDS = ("cpu", "cuda", "rocm", "mps", "xpu", "directml", "metal", "plaidml", "opencl", "vpu")
STATUSES = ("maintained", "preview", "unmaintained", "paused", "retired")
_REQUIRED = {
    "id": str,
    "title": str,
    "framework": str,
    "backend": str,
    "status": str,
    "speed": int,
    "conditions": dict,
    "install": dict,
    "verify": dict,
    "sources": list,
}


class RecipeError(ValueError):
    """A recipe file that does not have the shape the evaluator needs."""


def check_recipe(doc: Any, name: str = "recipe") -> Dict[str, Any]:
    if not isinstance(doc, dict):
        raise RecipeError(f"{name}: not an object")
    for key, typ in _REQUIRED.items():
        if key not in doc:
            raise RecipeError(f"{name}: missing {key!r}")
        if not isinstance(doc[key], typ) or (typ is int and isinstance(doc[key], bool)):
            raise RecipeError(f"{name}: {key!r} must be {typ.__name__}")
    if doc["backend"] not in BACKENDS:
        raise RecipeError(f"{name}: backend {doc['backend']!r} not in {BACKENDS}")
    if doc["status"] not in STATUSES:
        raise RecipeError(f"{name}: status {doc['status']!r} not in {STATUSES}")
    if not doc["sources"]:
        raise RecipeError(f"{name}: no sources")
    if doc["status"] == "retired" and not doc.get("successor"):
        raise RecipeError(f"{name}: a retired recipe names its successor")
    return doc


@lru_cache(maxsize=1)
def _load_recipes() -> tuple:  # type: ignore[type-arg]
    out = []
    for path in sorted(RECIPES_DIR.glob("*.json")):
        if path.name == SCHEMA_FILE.name:
            continue
        doc = json.loads(path.read_text(encoding="utf-8"))
        out.append(check_recipe(doc, path.name))
    ids = [r["id"] for r in out]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise RecipeError(f"duplicate recipe ids: {sorted(dupes)}")
    return tuple(out)


def load_recipes() -> List[Dict[str, Any]]:
    return list(_load_recipes())


def find_recipe(name: str) -> Dict[str, Any]:
    """By id or alias (e.g. `neon`, `ncsdk`, `tensorflow-opencl`)."""
    key = name.strip().lower()
    for r in _load_recipes():
        if r["id"] == key or key in [a.lower() for a in r.get("aliases", [])]:
            return r  # type: ignore[no-any-return]
    raise KeyError(name)


class Knowledge(Mapping[str, Any]):
    """mlprobe/knowledge/<stem>.json by stem, read on first use (big tables cost nothing unless asked)."""

    def __getitem__(self, stem: str) -> Any:
        value = kb.load(stem)
        if value is None:
            raise KeyError(stem)
        return value

    def get(self, stem: str, default: Any = None) -> Any:
        value = kb.load(stem)
        return default if value is None else value

    def __iter__(self) -> Iterator[str]:
        return iter(kb.stems())

    def __len__(self) -> int:
        return len(kb.stems())


def knowledge() -> Knowledge:
    return Knowledge()
