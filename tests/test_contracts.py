"""The typed stage contracts (mlprobe/model/contract.py, model/plan.py): every stored plan reads into
the types and writes back unchanged, validates against the schema derived from the types, and a
document of the wrong shape is refused with the field named."""

from __future__ import annotations

import copy
import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest

from mlprobe.model.contract import OMIT_IF_NONE, ContractError
from mlprobe.model.plan import Plan, plan_schema
from mlprobe.model.verify import VerifyResult
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
        ("recommended", lambda d: d.__setitem__("schema", 1), "schema: expected a string"),
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


# --------------------------------------------------------------------------- verify result

VERIFY_RESULTS = sorted(Path(__file__).resolve().parent.parent.glob("fixtures/verify-*/result.json"))


@pytest.mark.parametrize("path", VERIFY_RESULTS, ids=lambda p: p.parent.name)
def test_a_real_verify_result_reads_into_the_types_and_writes_back_unchanged(path: Path) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    result = VerifyResult.from_json(doc)
    out = result.to_json()
    # every value of the document comes back unchanged; a key an older mlprobe did not write yet
    # comes back as null
    _same_data(out, doc, "")
    assert VerifyResult.from_json(out) == result
    assert [r.verdict for r in result.results] == [r["verdict"] for r in doc["results"]]


def _same_data(out: Any, doc: Any, path: str) -> None:
    if isinstance(doc, dict):
        assert isinstance(out, dict), path
        for key in set(out) | set(doc):
            if key not in doc:
                assert out[key] is None, f"{path}.{key}"
            else:
                assert key in out, f"{path}.{key} lost"
                _same_data(out[key], doc[key], f"{path}.{key}")
    elif isinstance(doc, list):
        assert isinstance(out, list) and len(out) == len(doc), path
        for i, (a, b) in enumerate(zip(out, doc)):
            _same_data(a, b, f"{path}[{i}]")
    else:
        assert out == doc and type(out) is type(doc) or (isinstance(doc, int) and out == doc), path


def test_the_published_verify_schema_matches_the_types_field_by_field() -> None:
    from mlprobe.model.contract import json_schema
    from mlprobe.verify.schema import DEVICE_RESULT, VERIFY_SCHEMA

    derived = json_schema(VerifyResult, "verify")
    assert set(VERIFY_SCHEMA["required"]) == set(derived["required"])
    assert set(VERIFY_SCHEMA["properties"]) == set(derived["properties"]) - {"overrides"}
    device = derived["$defs"]["DeviceResult"]
    assert set(DEVICE_RESULT["required"]) == set(device["required"])
    assert set(DEVICE_RESULT["properties"]) <= set(device["properties"])


def test_a_verify_result_of_the_wrong_shape_names_the_field() -> None:
    doc = json.loads(VERIFY_RESULTS[0].read_text(encoding="utf-8"))
    doc["results"][0]["speedup_vs_best_cpu"] = "fast"
    with pytest.raises(ContractError, match=r"results\[0\]\.speedup_vs_best_cpu: expected a number"):
        VerifyResult.from_json(doc)


# --------------------------------------------------------------------------- report envelope

REPORT_BUNDLES = ["linux-nvidia-h200-mlprobe-capture", "synthetic-linux-nvidia-secrets",
                  "linux-amd-rx6700xt-gfx1031-hsa-override-rocminfo"]


@pytest.mark.parametrize("redact", [True, False])
@pytest.mark.parametrize("bundle", REPORT_BUNDLES)
def test_a_report_reads_into_the_types_and_writes_back_unchanged(bundle: str, redact: bool) -> None:
    from mlprobe.model.report import ReportEnvelope
    from tests.report_doc import build_report
    from mlprobe.report.envelope import ReportOptions, report_schema
    from mlprobe.scan.host import ReplayHost

    root = Path(__file__).resolve().parent.parent / "fixtures" / bundle
    doc = build_report(ReplayHost(root), ReportOptions(include_raw=True, redact=redact))
    jsonschema.Draft202012Validator(report_schema()).validate(doc)
    envelope = ReportEnvelope.from_json(doc)
    assert envelope.to_json() == doc
    assert envelope.capture_bundle is not None and envelope.capture_bundle.files
    assert envelope.redactions.enabled is redact


def test_the_published_report_schema_matches_the_types_field_by_field() -> None:
    from mlprobe.model.contract import json_schema
    from mlprobe.model.report import ReportEnvelope
    from mlprobe.report.envelope import report_schema

    published, derived = report_schema(), json_schema(ReportEnvelope, "report")
    assert set(published["properties"]) == set(derived["properties"])
    # required in the published schema = what the type always writes (every field not left out when None)
    always = {f.name for f in dataclasses.fields(ReportEnvelope) if not f.metadata.get(OMIT_IF_NONE)}
    assert set(published["required"]) == always
    assert set(derived["required"]) <= always
    for name in ("redactions", "capture_bundle"):
        sub = published["properties"][name]
        ref = derived["$defs"]["Redactions" if name == "redactions" else "CaptureBundle"]
        assert set(sub["required"]) == set(ref["required"]), name
        assert set(sub["properties"]) == set(ref["properties"]), name


def test_install_result_is_frozen_and_writes_plain_json(tmp_path: Path) -> None:
    from mlprobe.install.apply import ApplyResult

    from mlprobe.model.verify import VerifyResult
    from tests.report_doc import verify_doc

    verified = VerifyResult.from_json(verify_doc())
    res = ApplyResult(path=tmp_path, python=str(tmp_path / "bin" / "python"), installed=("torch==2.13.0+cpu",),
                      activate_scripts=(str(tmp_path / "bin" / "activate"),), log=None, import_ok=True,
                      verify=verified, seconds=12.345)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.seconds = 1.0  # type: ignore[misc]
    doc = res.to_dict()
    assert json.loads(json.dumps(doc)) == doc
    assert doc["installed"] == ["torch==2.13.0+cpu"] and doc["seconds"] == 12.3 and doc["path"] == str(tmp_path)
    assert doc["verify"] == verified.to_json()


def test_contract_equality_hash_and_repr_follow_the_fields() -> None:
    """The contracts share one __eq__/__hash__/__repr__ (model/contract.Record) instead of each
    compiling its own: equal fields are equal and hash alike, another field or another type is not
    equal, and the repr names every field."""
    from mlprobe.model.plan import IndexRef, VerifyTarget
    from mlprobe.model.vocabulary import vocabulary

    a = VerifyTarget(framework="torch", device="cuda")
    b = VerifyTarget(framework="torch", device="cuda")
    c = VerifyTarget(framework="torch", device="cpu")
    assert a == b and hash(a) == hash(b) and a != c and len({a, b, c}) == 2
    assert repr(a) == "VerifyTarget(framework='torch', device='cuda')"
    assert a != ("torch", "cuda")
    fields = [f.name for f in dataclasses.fields(IndexRef)]
    assert all(f"{n}=" in repr(IndexRef(**{n: None for n in fields})) for n in fields)  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.device = "cpu"  # type: ignore[misc]
    # a second registry read apart from the cached one (lru_cache's __wrapped__): equal, field by field
    # down to the nested rows, tuples and compiled patterns, without being the same objects
    cached, fresh = vocabulary(), vocabulary.__wrapped__()
    assert fresh is not cached and fresh.frameworks[0] is not cached.frameworks[0]
    assert fresh == cached and hash(fresh.frameworks[0]) == hash(cached.frameworks[0])
    assert dataclasses.replace(fresh, facts={**fresh.facts, "x.y": "int"}) != cached
    assert dataclasses.replace(fresh.frameworks[0], title="other") != cached.frameworks[0]


def test_a_contract_field_is_set_once() -> None:
    """`@contract` types behave as frozen dataclasses: a field cannot be assigned or deleted after
    __init__, no attribute can be added, and dataclasses.replace makes a changed copy."""
    from mlprobe.model.facts import MemoryFacts

    m = MemoryFacts(total_bytes=1, available_bytes=2)
    for act in (lambda: setattr(m, "total_bytes", 5), lambda: delattr(m, "total_bytes"),
                lambda: setattr(m, "extra", 1)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            act()
    assert m.total_bytes == 1
    n = dataclasses.replace(m, total_bytes=7)
    assert (n.total_bytes, n.available_bytes, m.total_bytes) == (7, 2, 1)
    import copy as _copy
    import pickle

    assert pickle.loads(pickle.dumps(m)) == m and _copy.deepcopy(m) == m


@pytest.mark.parametrize("vendor", [42, None, ["nvidia"], "<missing>"])
def test_a_gpu_whose_vendor_is_damaged_is_kept_with_its_vendor_unknown(vendor: Any) -> None:
    """The lenient reader (a report nobody checked) drops a list item whose required field it cannot
    read; a GPU is still a GPU when only its vendor is damaged: it stays, vendor "unknown"."""
    from mlprobe.model.facts import Facts, ScanReport

    gpu: Dict[str, Any] = {"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"}
    if vendor != "<missing>":
        gpu["vendor"] = vendor
    facts = Facts.from_report({"gpus": [gpu, {"vendor": "amd", "name": "Radeon RX 6800 XT"}]})
    assert [(g.vendor, g.name, g.compute_capability) for g in facts.gpus] == [
        ("unknown", "NVIDIA H100 80GB HBM3", "9.0"), ("amd", "Radeon RX 6800 XT", None)]
    with pytest.raises(ContractError, match=r"gpus\[0\]\.vendor"):  # the strict reader still names it
        ScanReport.from_json({"gpus": [gpu]})
