"""The typed stage contracts (mlprobe/model/contract.py, model/plan.py): every stored plan reads into
the types and writes back unchanged, validates against the schema derived from the types, and a
document of the wrong shape is refused with the field named."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from typing import Any, Dict

import pytest

from mlprobe.model.contract import ContractError
from mlprobe.model.plan import Plan, plan_schema
from tests.golden_cases import bundles, expected

jsonschema = pytest.importorskip("jsonschema")

PLANS = [b for b in bundles() if expected("plan", b)["exit_code"] == 0]


def _plan(bundle: str) -> Dict[str, Any]:
    doc: Dict[str, Any] = expected("plan", bundle)["output"]
    return doc


def test_the_plan_schema_is_a_valid_schema_and_the_cli_prints_it() -> None:
    out = subprocess.run([sys.executable, "-m", "mlprobe", "schema", "plan"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    printed = json.loads(out.stdout)
    jsonschema.Draft202012Validator.check_schema(printed)
    assert printed == plan_schema()
    # every contract of the plan is described
    assert {"Recommendation", "Rejection", "RetiredPath", "InstalledFinding", "PlanTarget"} <= set(printed["$defs"])


def test_there_are_plans_to_check() -> None:
    assert len(PLANS) >= 50


@pytest.mark.parametrize("bundle", PLANS)
def test_a_stored_plan_reads_into_the_types_and_writes_back_unchanged(bundle: str) -> None:
    doc = _plan(bundle)
    jsonschema.Draft202012Validator(plan_schema()).validate(doc)
    plan = Plan.from_json(doc)
    assert plan.to_json() == doc
    # the typed values are the document's
    assert [r.recipe for r in plan.recommended] == [r["recipe"] for r in doc["recommended"]]
    assert [list(r.reasons) for r in plan.rejected] == [r["reasons"] for r in doc["rejected"]]


def _some_plan_with(key: str) -> Dict[str, Any]:
    for b in PLANS:
        doc = _plan(b)
        if doc[key]:
            return copy.deepcopy(doc)
    raise AssertionError(f"no stored plan has {key}")


@pytest.mark.parametrize(
    "key, break_it, named",
    [
        ("rejected", lambda d: d["rejected"][0]["reasons"].__setitem__(0, {"a": 1}), "rejected[0].reasons[0]"),
        ("rejected", lambda d: d["rejected"][0].pop("recipe"), "rejected[0].recipe: missing"),
        ("installed", lambda d: d["installed"][0].__setitem__("fix", "pip install x"), "installed[0].fix"),
        ("recommended", lambda d: d["recommended"][0].__setitem__("packages", {"torch": 1}),
         "recommended[0]: 'packages'"),
        ("recommended", lambda d: d.__setitem__("plan_version", "1"), "plan_version: expected an integer"),
        ("recommended", lambda d: d["target"].__setitem__("wsl", "no"), "target.wsl: expected true or false"),
        ("recommended", lambda d: d.__setitem__("top", ["torch-cpu"]), "top: expected an object"),
    ],
)
def test_a_document_of_the_wrong_shape_names_the_field(key: str, break_it: Any, named: str) -> None:
    doc = _some_plan_with(key)
    break_it(doc)
    with pytest.raises(ContractError) as err:
        Plan.from_json(doc)
    assert named in str(err.value)


def test_a_plan_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(ContractError, match="expected an object"):
        Plan.from_json(["not", "a", "plan"])
