"""`mlprobe diff A B`: the machine that works against the one that doesn't."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mlprobe.cli import main
from mlprobe.scan.host import ReplayHost
from mlprobe.pipeline import diff_side as load_side
from mlprobe.model.facts import CpuFacts, Facts, FrameworkFacts, GpuFacts, OsFacts, PythonFacts
from mlprobe.model.plan import Plan, PlanTarget, Recommendation
from mlprobe.report import diff
from mlprobe.report.diff import (DiffInputError, Difference, Side, diff_document, diff_sides, read_side,
                                 render_table)
from tests.report_doc import build_report
from mlprobe.report.envelope import ReportOptions
from mlprobe.scan.run import facts_to_report, scan

from .conftest import FIXTURES
from .fuzz import examples, mutated


def as_dict(diffs: Any) -> Dict[str, Any]:
    return {f"{d.section}:{d.item}": (d.a, d.b) for d in diffs}


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> Dict[str, Any]:
    rc = main(["diff", *args, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert isinstance(doc, dict)
    assert rc == (0 if doc["same"] else 1)  # like diff(1): 1 when the machines differ
    return doc


def test_same_machine_has_no_differences(capsys: pytest.CaptureFixture[str]) -> None:
    folder = str(FIXTURES / "linux-nvidia-rtx3060-smi-xml")
    doc = run_json(capsys, folder, folder)
    assert doc["same"] is True and doc["differences"] == []
    assert main(["diff", folder, folder]) == 0
    assert "no differences" in capsys.readouterr().out


def test_report_against_its_own_bundle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A redacted report describes the same machine as the bundle it came from."""
    folder = FIXTURES / "synthetic-linux-nvidia-secrets"
    report = tmp_path / "r.json"
    report.write_text(
        json.dumps(build_report(ReplayHost(folder), ReportOptions(include_raw=True))), encoding="utf-8"
    )
    doc = run_json(capsys, str(report), str(folder))
    assert doc["a"]["kind"] == "report" and doc["b"]["kind"] == "bundle"
    assert doc["differences"] == [] and doc["plan_compared"] is True


def test_two_nvidia_machines(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(
        capsys,
        str(FIXTURES / "linux-nvidia-rtx3060-smi-xml"),
        str(FIXTURES / "linux-nvidia-tesla-t4-smi-xml"),
    )
    d = {f"{x['section']}:{x['item']}": (x["a"], x["b"]) for x in doc["differences"]}
    assert d["gpus:gpu 0 driver_version"] == ("570.124.04", "515.105.01")
    assert d["gpus:gpu 0 compute_capability"] == ("8.6", "7.5")
    assert d["runtimes:cuda.version"] == ("12.8", "11.7")
    assert "plan:top pick for torch" in d
    assert (
        main(
            [
                "diff",
                str(FIXTURES / "linux-nvidia-rtx3060-smi-xml"),
                str(FIXTURES / "linux-nvidia-tesla-t4-smi-xml"),
            ]
        )
        == 1
    )
    table = capsys.readouterr().out
    assert "compute_capability" in table and "12.0 GiB" in table


def test_cpu_level_and_flags() -> None:
    a = load_side(str(FIXTURES / "linux-nogpu-amd-opteron-8354-no-avx"))
    b = load_side(str(FIXTURES / "linux-nogpu-xeon-gold-6230-avx512"))
    d = as_dict(diff_sides(a, b))
    assert d["cpu:x86_64_level"] == (1, 4)
    assert "avx2" in d["cpu:flags only in B"][1].split() and "avx512f" in d["cpu:flags only in B"][1].split()
    assert "3dnow" in d["cpu:flags only in A"][0].split()


def test_gpu_count_and_pairing() -> None:
    a = load_side(str(FIXTURES / "linux-amd-mi300x-x4-rocminfo-rocm-smi"))
    b = load_side(str(FIXTURES / "linux-amd-rx6700xt-gfx1031-hsa-override-rocminfo"))
    d = as_dict(diff_sides(a, b))
    assert d["gpus:count"] == (4, 1)
    assert d["gpus:gpu 0 gfx_target"] == ("gfx942", "gfx1031")
    assert d["gpus:gpu 0 runtime_gfx_target"] == ("gfx942", "gfx1030")
    assert sum(1 for k in d if k.endswith("only in A")) == 3


def test_scan_json_and_frameworks(tmp_path: Path) -> None:
    a = facts_to_report(scan(ReplayHost(FIXTURES / "linux-amd-rx6800xt-wsl2-rocm-torch-collect-env")))
    b = json.loads(json.dumps(a))
    b["frameworks"] = [dict(b["frameworks"][0], version="2.5.1+cpu", flavour="cpu")]
    b["os"]["distro"] = "Ubuntu 24.04 LTS"
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_text(json.dumps(a), encoding="utf-8")
    pb.write_text(json.dumps(b), encoding="utf-8")
    sa, sb = load_side(str(pa)), load_side(str(pb))
    assert sa.kind == "scan"
    d = as_dict(diff_sides(sa, sb))
    assert d["frameworks:torch"] == ("2.1.2+rocm6.1.3 (rocm6.1.3)", "2.5.1+cpu (cpu)")
    assert d["os:distro"] == ("Ubuntu 22.04.4 LTS", "Ubuntu 24.04 LTS")


def _plan(top: str, title: str) -> Plan:
    return Plan(schema="mlprobe.plan/2", framework="any", target=PlanTarget(None, None, None, None, None),
                top={"torch": top}, recommended=(Recommendation(recipe=top, title=title),), rejected=(),
                retired=(), installed=(), warnings=())


def test_plan_top_picks_are_compared() -> None:
    a = Side("a", Facts(), _plan("torch-cuda", "T"), "report")
    b = Side("b", Facts(), _plan("torch-cpu", "C"), "report")
    d = as_dict(diff_sides(a, b))
    assert d == {"plan:top pick for torch": ("T [torch-cuda]", "C [torch-cpu]")}
    doc = diff_document(a, b, diff_sides(a, b))
    assert doc["same"] is False and doc["plan_compared"] is True
    assert "top pick for torch" in render_table(a, b, diff_sides(a, b))


def test_a_report_plan_that_is_no_plan_is_not_compared() -> None:
    """A report's plan is read once, leniently: `{"available": false}` or a plan missing its required
    fields is no plan (the table says the top picks were not compared), never an error."""
    plan = _plan("torch-cuda", "T").to_json()
    for bad in ({"available": False, "note": "the planner failed"}, {"top": {"torch": "x"}}, [1], None):
        side = read_side("a", {"os": {}}, bad, "report")
        assert side.plan is None
    side = read_side("a", {"os": {}}, dict(plan, warnings=["kept", 5]), "report")  # an item of the wrong type: left out
    assert side.plan is not None and side.plan.top == {"torch": "torch-cuda"} and side.plan.warnings == ("kept",)
    other = read_side("b", {"os": {}}, None, "report")
    assert "plan top picks not compared: no plan for b" in render_table(side, other, [Difference("os", "x", 1, 2)])


def test_compared_fields_are_fields_of_the_facts() -> None:
    for names, record in ((diff.OS_FIELDS, OsFacts), (diff.CPU_FIELDS, CpuFacts), (diff.GPU_FIELDS, GpuFacts),
                          (diff.PYTHON_FIELDS, PythonFacts)):
        known = set(record.__dataclass_fields__)
        assert set(names) <= known, (record.__name__, set(names) - known)
    assert set(FrameworkFacts.__dataclass_fields__) >= {"name", "version", "flavour"}


def test_an_embedded_bundle_without_scan_is_replayed(tmp_path: Path) -> None:
    doc = build_report(
        ReplayHost(FIXTURES / "linux-nvidia-tesla-t4-smi-xml"), ReportOptions(include_raw=True)
    )
    del doc["scan"]
    p = tmp_path / "bundle-only.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    side = load_side(str(p))
    assert side.kind == "bundle" and side.scan.gpus[0].name == "Tesla T4"


def test_bad_inputs_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "junk.json"
    junk.write_text("[1, 2, 3]", encoding="utf-8")
    assert main(["diff", str(junk), str(FIXTURES / "linux-nvidia-tesla-t4-smi-xml")]) == 2
    assert "E701" in capsys.readouterr().err
    assert main(["diff", str(tmp_path / "missing.json"), str(junk)]) == 2
    with pytest.raises(DiffInputError):
        load_side(str(junk))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@pytest.mark.slow
@settings(max_examples=examples(80), deadline=None)
@given(
    a=st.dictionaries(
        st.sampled_from(["os", "cpu", "gpus", "runtimes", "frameworks", "python"]), json_values
    ),
    b=st.dictionaries(
        st.sampled_from(["os", "cpu", "gpus", "runtimes", "frameworks", "python"]), json_values
    ),
    plan=json_values,
)
def test_any_json_shape_diffs_without_crashing(a: Dict[str, Any], b: Dict[str, Any], plan: Any) -> None:
    sa = read_side("a", a, plan, "scan")
    sb = read_side("b", b, None, "scan")
    diffs = diff_sides(sa, sb)
    json.dumps(diff_document(sa, sb, diffs))
    render_table(sa, sb, diffs)
    assert diff_sides(sa, sa) == []


REPORT_TEXT = json.dumps(
    facts_to_report(scan(ReplayHost(FIXTURES / "linux-nvidia-rtx3060-smi-xml"))), indent=1
)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=mutated(REPORT_TEXT))
def test_mutated_scan_json_loads_or_fails_cleanly(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    p = tmp_path_factory.mktemp("m") / "scan.json"
    p.write_text(text, encoding="utf-8", errors="replace")
    try:
        side = load_side(str(p))
    except DiffInputError:
        return
    diff_sides(side, load_side(str(p)))
