"""Documents written before the one version key (`report_version`, `plan_version`, `doctor_version`,
`fleet_version`, `diff_version`, all 1; tests/old_documents/ says how each was made) keep reading:
replay, merge, diff and show give what today's documents give, and today's documents carry
`"schema": "mlprobe.<kind>/<n>"`."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from mlprobe.cli import main
from mlprobe.model.docversion import CURRENT, VersionError, schema_id, upgraded, version_of

from .conftest import FIXTURES, ROOT

OLD = ROOT / "tests" / "old_documents"
H100 = FIXTURES / "linux-nvidia-h100-smi"
H200 = FIXTURES / "linux-nvidia-h200-mlprobe-capture"
OLD_FLEET_FIXTURE = FIXTURES / "fleet-linux-nvidia-h200-one-node" / "fleet.json"
OLD_PLAN_FIXTURE = FIXTURES / "verify-linux-nvidia-h200-jax-0.11.2-cuda13" / "plan-jax-live.json"


def run(*args: str) -> Tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def jrun(*args: str) -> Tuple[int, Any]:
    code, out, err = run(*args)
    assert out, err
    return code, json.loads(out)


def _old(name: str) -> Dict[str, Any]:
    doc: Dict[str, Any] = json.loads((OLD / name).read_text(encoding="utf-8"))
    return doc


def _without_volatile(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _without_volatile(v) for k, v in doc.items()
                if k not in ("schema", "report_version", "mlprobe_version", "seconds", "source")}
    if isinstance(doc, list):
        return [_without_volatile(v) for v in doc]
    return doc


def test_the_old_documents_are_old() -> None:
    keys = {"report-v1-h100.json": "report_version", "scan-v1-h100.json": "report_version",
            "plan-v1-h100.json": "plan_version", "doctor-v1-h200.json": "doctor_version",
            "fleet-v1.json": "fleet_version", "diff-v1.json": "diff_version"}
    for name, key in keys.items():
        doc = _old(name)
        assert doc[key] == 1 and "schema" not in doc, name


def test_replay_of_an_old_report_gives_todays_facts() -> None:
    code, old = jrun("scan", "--replay", str(OLD / "report-v1-h100.json"), "--json")
    assert code == 0 and old["schema"] == "mlprobe.scan/2"
    _, new = jrun("scan", "--replay", str(H100), "--json")
    assert _without_volatile(old) == _without_volatile(new)
    code, plan = jrun("plan", "--replay", str(OLD / "report-v1-h100.json"), "--json")
    assert code == 0 and plan["schema"] == "mlprobe.plan/2" and plan["recommended"][0]["recipe"] == "torch-cuda"


def test_an_old_scan_json_diffs_against_a_capture() -> None:
    code, doc = jrun("diff", str(OLD / "scan-v1-h100.json"), str(H100), "--json")
    assert doc["schema"] == "mlprobe.diff/2" and code == 0 and doc["same"], doc["differences"]


def test_diff_of_an_old_report_and_a_new_one(tmp_path: Path) -> None:
    new = tmp_path / "new-h200.json"
    assert run("report", "--replay", str(H200), "-o", str(new))[0] == 0
    assert json.loads(new.read_text())["schema"] == "mlprobe.report/2"
    code, doc = jrun("diff", str(OLD / "report-v1-h200.json"), str(new), "--json")
    assert code == 0 and doc["same"], doc["differences"]
    code, doc = jrun("diff", str(OLD / "report-v1-h100.json"), str(new), "--json")
    assert code == 1 and doc["differences"]


def test_merge_of_old_and_new_reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the old reports were made from the fixtures' relative paths
    new = tmp_path / "new-h100.json"
    assert run("report", "--replay", "fixtures/linux-nvidia-h100-smi", "-o", str(new))[0] == 0
    for old_name in ("report-v1-h100.json",):
        shutil.copy(OLD / old_name, tmp_path / old_name)
    code, fleet = jrun("fleet", "merge", str(tmp_path / "report-v1-h100.json"), str(new),
                       str(OLD / "report-v1-h200.json"), "--json")
    assert code == 0 and fleet["schema"] == "mlprobe.fleet/2"
    assert fleet["summary"]["by_status"] == {"ok": 3}
    by_file = {Path(n["file"]).name: n for n in fleet["nodes"]}
    # the old report and today's of the same machine are one group with the same facts
    assert by_file["report-v1-h100.json"]["group"] == by_file["new-h100.json"]["group"]
    assert by_file["report-v1-h100.json"]["facts"] == by_file["new-h100.json"]["facts"]


@pytest.mark.parametrize("path", [OLD / "fleet-v1.json", OLD_FLEET_FIXTURE], ids=lambda p: p.name)
def test_show_of_an_old_fleet_report(path: Path) -> None:
    code, doc = jrun("fleet", "show", str(path), "--json")
    assert code == 0 and doc["schema"] == "mlprobe.fleet/1" and "fleet_version" not in doc
    code, text, err = run("fleet", "show", str(path))
    assert code == 0 and text.strip(), err


def test_bundle_for_an_old_report(tmp_path: Path) -> None:
    from tests.pep503_server import build_wheel

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    build_wheel(wheels, "torch", "2.14.0+cpu")
    code, doc = jrun("bundle", "--replay", str(OLD / "report-v1-h200.json"), "--recipe", "torch-cpu",
                     "-o", str(tmp_path / "out"), "--no-index", "--find-links", str(wheels), "--json")
    assert code == 0 and doc["schema"] == "mlprobe.bundle/1", doc


def test_typed_readers_take_old_documents() -> None:
    from mlprobe.model.doctor import DoctorResult
    from mlprobe.model.facts import ScanReport
    from mlprobe.model.plan import Plan
    from mlprobe.model.report import ReportEnvelope
    from mlprobe.fleet.model import FleetDocument

    assert Plan.from_json(_old("plan-v1-h100.json")).schema == "mlprobe.plan/1"
    assert Plan.from_json(json.loads(OLD_PLAN_FIXTURE.read_text())).top == {"jax": "jax-cuda13"}
    assert DoctorResult.from_json(_old("doctor-v1-h200.json")).schema == "mlprobe.doctor/1"
    assert ScanReport.from_json(_old("scan-v1-h100.json")).schema == "mlprobe.scan/1"
    env = ReportEnvelope.from_json(_old("report-v1-h100.json"))
    assert (env.schema, env.scan.schema) == ("mlprobe.report/1", "mlprobe.scan/1")
    assert FleetDocument.from_json(_old("fleet-v1.json")).schema == "mlprobe.fleet/1"


def test_newer_and_broken_versions_are_refused_with_the_reason(tmp_path: Path) -> None:
    doc = _old("report-v1-h100.json")
    for key, value, said in (("schema", "mlprobe.report/9", "newer than this mlprobe reads"),
                             ("schema", "mlprobe.plan/2", "it is a plan document"),
                             ("schema", 7, "expected 'mlprobe.report/2'"),
                             ("report_version", 2, "newer than this mlprobe reads")):
        bad = {k: v for k, v in doc.items() if k not in ("report_version", "schema")}
        bad[key] = value
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(bad))
        code, _out, err = run("scan", "--replay", str(path))
        assert code == 2 and said in err, (key, value, err)
    with pytest.raises(VersionError):
        version_of({"fleet_version": 0}, "fleet")


def test_every_json_document_carries_the_one_key(tmp_path: Path) -> None:
    docs: List[Tuple[str, Any]] = []
    for args, kind in ((("scan", "--replay", str(H100), "--json"), "scan"),
                       (("plan", "--replay", str(H100), "--json"), "plan"),
                       (("plan", "--replay", str(H100), "--json", "--why-not", "torch-cuda"), "why-not"),
                       (("doctor", "--replay", str(H200), "--json"), "doctor"),
                       (("diff", str(H100), str(H200), "--json"), "diff"),
                       (("install", "--replay", str(H100), "--json"), "install"),
                       (("report", "--replay", str(H100)), "report"),
                       (("plan", "--python", "x", "--json"), "error")):
        _code, out, err = run(*args)
        doc = json.loads(out)
        docs.append((kind, doc))
        assert doc["schema"] == schema_id(kind) and list(doc)[0] == "schema", (args, err)
        assert not any(k.endswith("_version") and k != "mlprobe_version" for k in doc), args
    report = dict(docs)["report"]
    assert report["scan"]["schema"] == "mlprobe.scan/2" and report["plan"]["schema"] == "mlprobe.plan/2"


def test_upgraded_keeps_everything_else() -> None:
    doc = _old("report-v1-h100.json")
    up = upgraded(doc, "report")
    assert up["schema"] == "mlprobe.report/1" and up["scan"]["schema"] == "mlprobe.scan/1"
    assert up["plan"]["schema"] == "mlprobe.plan/1"
    assert {k: v for k, v in up.items() if k not in ("schema", "scan", "plan", "doctor")} == \
        {k: v for k, v in doc.items() if k not in ("report_version", "scan", "plan", "doctor")}
    assert set(CURRENT) >= {"scan", "report", "plan", "doctor", "fleet", "verify", "install", "bundle", "diff"}
