"""The recipe catalog (one JSON file per recipe, checked against recipe.schema.json in the tests) and
the knowledge tables in mlprobe/knowledge/*.json. Loading is lazy and cached; at run time a structural
check runs (jsonschema is a test dependency) and every name a recipe uses is checked against the
registry (mlprobe/knowledge/registry.json): an unknown framework, backend, fact or named test is an
error when the recipes load, not an "unknown" at plan time."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

from ..model import knowledge as kb
from ..model.knowledge import Knowledge
from ..model.recipe import Recipe
from ..model.vocabulary import vocabulary

RECIPES_DIR = Path(__file__).resolve().parent
KNOWLEDGE_DIR = kb.KNOWLEDGE_DIR
SCHEMA_FILE = RECIPES_DIR / "recipe.schema.json"

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
    voc = vocabulary()
    if doc["framework"] not in voc.framework_ids():
        raise RecipeError(f"{name}: framework {doc['framework']!r} is not in the registry "
                          f"({', '.join(voc.framework_ids())})")
    if doc["backend"] not in voc.backend_ids():
        raise RecipeError(f"{name}: backend {doc['backend']!r} not in {voc.backend_ids()}")
    for fw in doc.get("provides", []):
        if fw not in voc.plan_frameworks():
            raise RecipeError(f"{name}: provides {fw!r}, which is not a framework a plan offers "
                              f"({', '.join(voc.plan_frameworks())})")
    if doc["status"] not in STATUSES:
        raise RecipeError(f"{name}: status {doc['status']!r} not in {STATUSES}")
    if not doc["sources"]:
        raise RecipeError(f"{name}: no sources")
    if doc["status"] == "retired" and not doc.get("successor"):
        raise RecipeError(f"{name}: a retired recipe names its successor")
    check_names(doc, name)
    return doc


_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z0-9_.]+)\}")


def _walk(node: Any) -> Iterator[Any]:
    yield node
    if isinstance(node, dict):
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def check_names(doc: Dict[str, Any], name: str = "recipe") -> None:
    """Every fact a condition names (`"fact": "nvidia.count"`, `{nvidia.count}` in a sentence), and
    every named test, is one the rules engine has: a misspelling is an error here."""
    from ..plan.rules import TESTS

    voc = vocabulary()
    groups = set(voc.fact_groups())
    for node in _walk(doc):
        if isinstance(node, dict):
            fact = node.get("fact")
            if isinstance(fact, str) and not fact.startswith("row.") and not voc.is_fact(fact):
                raise RecipeError(f"{name}: unknown fact {fact!r} (the facts are listed in "
                                  "mlprobe/knowledge/registry.json)")
            test = node.get("test")
            if isinstance(test, str) and test not in TESTS:
                raise RecipeError(f"{name}: unknown test {test!r} (known: {', '.join(sorted(TESTS))})")
        elif isinstance(node, str) and "{" in node:
            for head, rest in _PLACEHOLDER.findall(node):
                if head in ("row", "effects"):
                    continue
                path = f"{head}.{rest}"
                if head in groups and not voc.is_fact(path) or head not in groups:
                    raise RecipeError(f"{name}: {{{path}}} names no fact (the facts are listed in "
                                      "mlprobe/knowledge/registry.json)")


def recipe_schema() -> Dict[str, Any]:
    """recipe.schema.json with the registry's frameworks and backends as the allowed values."""
    doc: Dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    voc = vocabulary()
    props = doc["properties"]
    props["framework"] = {"enum": list(voc.framework_ids())}
    props["provides"] = {"type": "array", "items": {"enum": list(voc.plan_frameworks())}}
    props["backend"] = {"enum": list(voc.backend_ids())}
    return doc


@lru_cache(maxsize=1)
def _load_recipes() -> Tuple[Recipe, ...]:
    out = []
    for path in sorted(RECIPES_DIR.glob("*.json")):
        if path.name == SCHEMA_FILE.name:
            continue
        doc = json.loads(path.read_text(encoding="utf-8"))
        out.append(Recipe.from_doc(check_recipe(doc, path.name)))
    ids = [r.id for r in out]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise RecipeError(f"duplicate recipe ids: {sorted(dupes)}")
    return tuple(out)


def load_recipes() -> List[Recipe]:
    """Every recipe, checked and read into its type once."""
    return list(_load_recipes())


def find_recipe(name: str) -> Recipe:
    """By id or alias (e.g. `neon`, `ncsdk`, `tensorflow-opencl`)."""
    key = name.strip().lower()
    for r in _load_recipes():
        if r.id == key or key in [a.lower() for a in r.aliases]:
            return r
    raise KeyError(name)


def knowledge() -> Knowledge:
    return Knowledge()
