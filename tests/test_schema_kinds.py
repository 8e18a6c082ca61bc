"""`mlprobe schema KIND` for every kind of --json document: one `$id` style (the document's own
`schema` value), and the real outputs of install, bundle and diff validate against theirs."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any, Tuple

import jsonschema
import pytest

from mlprobe.cli import main
from mlprobe.commands.schema import KINDS

from .conftest import FIXTURES

H100 = FIXTURES / "linux-nvidia-h100-smi"
H200 = FIXTURES / "linux-nvidia-h200-mlprobe-capture"


def run(*args: str) -> Tuple[int, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(list(args))
    return code, json.loads(out.getvalue())


def schema(kind: str) -> Any:
    code, doc = run("schema", kind)
    assert code == 0
    return doc


@pytest.mark.parametrize("kind", KINDS)
def test_one_id_style(kind: str) -> None:
    doc = schema(kind)
    assert doc["$id"].startswith(f"mlprobe.{kind}/") and doc["$schema"].endswith("2020-12/schema")
    jsonschema.Draft202012Validator.check_schema(doc)
    if kind != "recipe":  # a recipe file is written by people, not by mlprobe
        assert doc["properties"]["schema"] == {"const": doc["$id"]} and doc["required"][0] == "schema"


def _valid(kind: str, doc: Any) -> None:
    jsonschema.validate(doc, schema(kind))
    assert doc["schema"] == schema(kind)["$id"]


def test_install_output_validates() -> None:
    _code, doc = run("install", "--replay", str(H100), "--json")  # 3: offline index check
    _valid("install", doc)
    broken = dict(doc, applied="no")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema("install"))


def test_diff_output_validates() -> None:
    code, doc = run("diff", str(H100), str(H200), "--json")
    assert code == 1 and doc["differences"]
    _valid("diff", doc)


def test_bundle_output_validates(tmp_path: Path) -> None:
    from tests.pep503_server import build_wheel

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    build_wheel(wheels, "torch", "2.14.0+cpu")
    code, doc = run("bundle", "--replay", str(H200), "--recipe", "torch-cpu", "-o", str(tmp_path / "out"),
                    "--no-index", "--find-links", str(wheels), "--json")
    assert code == 0
    _valid("bundle", doc)


@pytest.mark.parametrize("kind,args", [
    ("scan", ("scan", "--replay", str(H100), "--json")),
    ("plan", ("plan", "--replay", str(H100), "--json")),
    ("doctor", ("doctor", "--replay", str(H200), "--json")),
    ("report", ("report", "--replay", str(H100))),
])
def test_the_others_validate_too(kind: str, args: Tuple[str, ...]) -> None:
    _code, doc = run(*args)
    _valid(kind, doc)
