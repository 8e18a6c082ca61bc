"""The recipe catalog and the knowledge tables: every recipe fits its schema and names its sources,
every knowledge row carries a source that its file explains, and every reference between them resolves."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Tuple

import jsonschema
import pytest

from mlprobe.plan import rules
from mlprobe.recipes import (
    KNOWLEDGE_DIR,
    RECIPES_DIR,
    SCHEMA_FILE,
    RecipeError,
    check_recipe,
    find_recipe,
    knowledge,
    load_recipes,
    recipe_schema,
)
from mlprobe.model.context import View
from mlprobe.model.facts import JetsonInfo
from mlprobe.model.vocabulary import vocabulary

from .conftest import FIXTURES

RECIPE_FILES = sorted(p for p in RECIPES_DIR.glob("*.json") if p.name != SCHEMA_FILE.name)
KNOWLEDGE_FILES = sorted(KNOWLEDGE_DIR.glob("*.json"))


def rows_of(doc: Any, path: str = "") -> Iterator[Tuple[str, Dict[str, Any]]]:
    """Every table row in a knowledge file: each object inside a list, at any depth (not source_key)."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k == "source_key":
                continue
            yield from rows_of(v, f"{path}.{k}" if path else k)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            if isinstance(v, dict):
                yield f"{path}[{i}]", v
            # rows hold plain values or small objects (vendor maps); those are not rows themselves


def row_problems(doc: Dict[str, Any]) -> List[str]:
    keys = set((doc.get("source_key") or {}).keys())
    out = []
    if not keys:
        out.append("no source_key")
    for where, row in rows_of(doc):
        src = row.get("source")
        if not src:
            out.append(f"{where}: no source")
            continue
        for sid in src if isinstance(src, list) else [src]:
            if keys and sid not in keys:
                out.append(f"{where}: source {sid!r} is not explained in source_key")
    return out


@pytest.mark.parametrize("path", KNOWLEDGE_FILES, ids=[p.name for p in KNOWLEDGE_FILES])
def test_every_knowledge_row_has_a_source(path: Path) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    assert list(rows_of(doc)), f"{path.name} has no rows"
    problems = row_problems(doc)
    assert not problems, f"{path.name}:\n" + "\n".join(problems[:20])


def test_a_row_without_a_source_fails_the_check() -> None:
    doc = {
        "source_key": {"A": {"reference": "x"}},
        "rows": [{"x": 1, "source": "A"}, {"x": 2}],
        "nested": {"more": [{"y": 1, "source": "B"}]},
    }
    problems = row_problems(doc)
    assert any("rows[1]: no source" in p for p in problems)
    assert any("source 'B'" in p for p in problems)


@pytest.fixture(scope="module")
def schema() -> Dict[str, Any]:
    return recipe_schema()


def test_schema_is_valid(schema: Dict[str, Any]) -> None:
    jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("path", RECIPE_FILES, ids=[p.stem for p in RECIPE_FILES])
def test_recipe_fits_schema(path: Path, schema: Dict[str, Any]) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    jsonschema.validate(doc, schema)
    check_recipe(doc, path.name)
    assert doc["id"] == path.stem, "file name and id agree"
    assert all(s["reference"].strip() for s in doc["sources"])


def _conditions(node: Any) -> Iterator[Dict[str, Any]]:
    if isinstance(node, dict):
        if any(k in node for k in ("fact", "test", "all", "any", "not")):
            yield node
        for v in node.values():
            yield from _conditions(v)
    elif isinstance(node, list):
        for v in node:
            yield from _conditions(v)


@pytest.mark.parametrize("path", RECIPE_FILES, ids=[p.stem for p in RECIPE_FILES])
def test_recipe_references_resolve(path: Path) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    kb = knowledge()
    for cond in _conditions(doc):
        if "test" in cond:
            assert cond["test"] in rules.TESTS, f"unknown test {cond['test']}"
        if "fact" in cond and not cond["fact"].startswith("row."):
            assert vocabulary().is_fact(cond["fact"]), cond["fact"]
        if "fact" in cond and cond["fact"] != "-" and "because" in cond and cond["because"] != "-":
            assert len(cond["because"]) > 12, f"say why in a sentence: {cond}"
    spec = doc.get("variants")
    if spec:
        table = kb.at(spec["table"])
        assert table, f"{spec['table']} is empty"
        keys = set().union(*(r.keys() for r in table))
        text = json.dumps(spec) + json.dumps(doc.get("install")) + json.dumps(doc.get("warn_if", []))
        for ref in re.findall(r"\{row\.([a-z_0-9]+)\}", text):
            assert ref in keys, f"{{row.{ref}}} is no column of {spec['table']}"


def test_ids_and_aliases_are_unique() -> None:
    seen: Dict[str, str] = {}
    for r in load_recipes():
        for name in [r.id, *r.aliases]:
            assert name not in seen, f"{name} names both {seen[name]} and {r.id}"
            seen[name] = r.id
    assert find_recipe("neon").id == "intel-nervana-neon"
    assert find_recipe("NCSDK").id == "movidius-ncsdk-caffe"
    assert find_recipe("tensorflow-opencl").id == "tensorflow-sycl-opencl"


def test_catalog_covers_the_issue() -> None:
    ids = {r.id for r in load_recipes()}
    assert {
        "torch-cuda",
        "torch-rocm",
        "torch-cpu",
        "torch-mps",
        "torch-xpu",
        "torch-directml",
        "tensorflow-cpu",
        "tensorflow-cuda",
        "tensorflow-metal",
        "tensorflow-directml-plugin",
        "plaidml-keras",
        "tensorflow-sycl-opencl",
        "intel-nervana-neon",
        "movidius-ncsdk-caffe",
    } <= ids
    statuses = {r.id: r.status for r in load_recipes()}
    assert statuses["tensorflow-directml-plugin"] == "paused"
    assert statuses["plaidml-keras"] == "unmaintained"
    assert all(
        statuses[i] == "retired"
        for i in ("tensorflow-sycl-opencl", "intel-nervana-neon", "movidius-ncsdk-caffe")
    )


@pytest.mark.parametrize(
    "bad, why",
    [
        ({"id": "x"}, "missing"),
        (
            dict(
                id="x",
                title="t",
                framework="torch",
                backend="quantum",
                status="maintained",
                speed=1,
                conditions={},
                install={},
                verify={},
                sources=[{"id": "a", "reference": "b"}],
            ),
            "backend",
        ),
        (
            dict(
                id="x",
                title="t",
                framework="torch",
                backend="cpu",
                status="maintained",
                speed=1,
                conditions={},
                install={},
                verify={},
                sources=[],
            ),
            "no sources",
        ),
        (
            dict(
                id="x",
                title="t",
                framework="torch",
                backend="cpu",
                status="retired",
                speed=1,
                conditions={},
                install={},
                verify={},
                sources=[{"id": "a", "reference": "b"}],
            ),
            "successor",
        ),
        (
            dict(
                id="x",
                title="t",
                framework="torch",
                backend="cpu",
                status="maintained",
                speed=True,
                conditions={},
                install={},
                verify={},
                sources=[{"id": "a", "reference": "b"}],
            ),
            "speed",
        ),
    ],
)
def test_runtime_check_rejects_broken_recipes(bad: Dict[str, Any], why: str) -> None:
    with pytest.raises(RecipeError, match=why):
        check_recipe(bad)


def _recipe(**changes: Any) -> Dict[str, Any]:
    doc = json.loads((RECIPES_DIR / "torch-cuda.json").read_text(encoding="utf-8"))
    doc.update(changes)
    return doc


@pytest.mark.parametrize("changes, words", [
    ({"framework": "torchh"}, "framework 'torchh' is not in the registry"),
    ({"backend": "cudaa"}, "backend 'cudaa'"),
    ({"provides": ["neon"]}, "provides 'neon'"),
    ({"conditions": {"all": [{"fact": "nvidia.cnt", "gte": 1, "because": "no NVIDIA GPU was found"}]}},
     "unknown fact 'nvidia.cnt'"),
    ({"conditions": {"all": [{"test": "cuda_driver_run"}]}}, "unknown test 'cuda_driver_run'"),
    ({"warn_if": [{"when": {"fact": "nvidia.mig", "equals": True, "because": "-"},
                   "text": "{nvidia.cuont} GPUs"}]}, "{nvidia.cuont} names no fact"),
])
def test_a_recipe_naming_an_unknown_name_fails_when_recipes_load(changes: Dict[str, Any], words: str) -> None:
    with pytest.raises(RecipeError) as e:
        check_recipe(_recipe(**changes), "torch-cuda.json")
    assert words in str(e.value)


def test_the_shipped_recipes_pass_the_load_check() -> None:
    for path in RECIPE_FILES:
        check_recipe(json.loads(path.read_text(encoding="utf-8")), path.name)


def names(obj: Any) -> List[str]:
    """The fields of a rules-context view or a facts record (none for anything else)."""
    if isinstance(obj, View):
        return list(obj.fields())
    return [f.name for f in dataclasses.fields(obj)] if dataclasses.is_dataclass(obj) else []


def _context_paths(ctx: Any) -> Dict[str, Any]:
    """Every `group.field` path of a rules context (and the whole-group ones), with its value."""

    out: Dict[str, Any] = {}
    for name in names(ctx):
        value = getattr(ctx, name)
        out[name] = value
        for sub in names(value):
            out[f"{name}.{sub}"] = getattr(value, sub)
    return out


def test_every_fact_of_the_vocabulary_is_in_a_derived_context() -> None:
    """Every fact the registry lists is a path of the typed rules context, of the declared type, and
    every field of the context's own views is in the registry (the scan's records, `os` and the
    GPUs, reach the context whole: test_rules_context.py)."""
    from mlprobe.model.facts import Facts
    from mlprobe.plan.context import derive
    from tests.golden_cases import expected

    types = {"str": (str,), "int": (int,), "bool": (bool,), "list": (tuple, list), "dict": (Mapping,)}
    voc = vocabulary()
    for folder in [FIXTURES / "linux-nvidia-h200-mlprobe-capture", FIXTURES / "darwin-apple-m4-max-sysctl"]:
        ctx = derive(Facts.from_report(expected("scan", folder.name)["output"]), knowledge())
        paths = _context_paths(ctx)
        missing = set(voc.facts) - set(paths)
        assert not missing, missing
        views = {p for p in paths if "." in p and not p.startswith("os.")}
        assert views <= set(voc.facts) | {"jetson." + f.name for f in dataclasses.fields(JetsonInfo)}, \
            views - set(voc.facts)
        for path, typ in voc.facts.items():
            value = paths[path]
            wanted = types[typ.rstrip("?")]
            assert value is None and typ.endswith("?") or isinstance(value, wanted) \
                or typ.startswith("dict") and bool(names(value)), (path, value)