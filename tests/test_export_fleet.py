"""`mlprobe export --to uv --fleet`: the reports of real fixture machines combined into one
pyproject.toml, each build gated by the platform markers of the nodes that need it; where two nodes of
one platform and CPU need different builds (no marker tells them apart) a clear refusal naming both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List

import pytest

from mlprobe import pipeline
from mlprobe.errors import StageError
from mlprobe.export.decide import decide
from mlprobe.export.fleet import Node, combine, identical_builds
from mlprobe.install.steps import pick
from mlprobe.report.envelope import ReportOptions
from mlprobe.scan.host import ReplayHost, open_replay
from tests.report_doc import build_report
from tests.test_export import _mlprobe, tomllib

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
H200 = "linux-nvidia-h200-mlprobe-capture"
MAC = "darwin-apple-m4-max-sysctl"
NOGPU = "linux-nogpu-amd-epyc-zen5-mlprobe-capture"


def _node(name: str, framework: str = "torch") -> Node:
    facts = pipeline.scan_report(open_replay(str(FIX / name)), {"kind": "replay", "bundle": name})
    return Node(name, decide(facts, pick(pipeline.plan(facts, framework=framework), None)))


def _reports(folder: Path, names: List[str], copies: int = 1) -> Path:
    folder.mkdir()
    for name in names:
        doc = build_report(ReplayHost(FIX / name), ReportOptions(), source={"kind": "replay", "bundle": name},
                           now="2026-01-01T00:00:00Z")
        for i in range(copies):
            (folder / f"{name}-{i}.json").write_text(json.dumps(doc), encoding="utf-8")
    return folder


def _deps(text: str) -> Dict[str, List[str]]:
    doc = tomllib.loads(text)
    out: Dict[str, List[str]] = {}
    for d in doc["project"]["dependencies"]:
        out.setdefault(d.split(";")[0].split("=")[0].strip(), []).append(d)
    return out


def test_a_linux_gpu_node_and_a_mac_get_their_own_builds_by_platform() -> None:
    exp = combine([_node(H200), _node(MAC)])
    sources = {p.name: p for p in exp.pins if p.index}
    torch = sources["torch"]
    use = exp.index(torch.index)
    assert use is not None and use.url.endswith("/whl/cu130")
    assert torch.source_marker == "sys_platform == 'linux'"
    lines = sorted(p.dependency for p in exp.pins if p.name == "torch")
    assert lines == ["torch ; sys_platform == 'darwin'", "torch==2.11.0 ; sys_platform == 'linux'"]


def test_a_cpu_login_node_beside_a_gpu_node_of_the_same_platform_is_refused_naming_both() -> None:
    with pytest.raises(StageError) as err:
        combine([_node(NOGPU), _node(H200)])
    e = err.value
    assert e.ref == "E417" and NOGPU in e.what and H200 in e.what and "linux x86_64" in e.what
    assert "/whl/cpu" in e.what and "/whl/cu130" in e.what and "conflicts" in (e.next_step or "")


def test_many_nodes_of_one_kind_export_as_one() -> None:
    h = _node(H200)
    nodes = [Node(f"n{i}", h.export) for i in range(50)] + [_node(MAC)]
    assert len(identical_builds(nodes)) == 2
    assert combine(identical_builds(nodes)).pins == combine([h, _node(MAC)]).pins


def test_cli_writes_one_file_keeps_the_users_content_and_a_second_run_changes_nothing(tmp_path: Path) -> None:
    reports = _reports(tmp_path / "reports", [H200, MAC], copies=3)
    project = tmp_path / "proj"
    project.mkdir()
    py = project / "pyproject.toml"
    py.write_text('[project]\nname = "x"\nversion = "0"\n# keep me\ndependencies = ["rich"]\n\n'
                  '[tool.ruff]\nline-length = 100\n', encoding="utf-8")
    r = _mlprobe("export", "--to", "uv", "--framework", "torch", "--fleet", str(reports), "--into", str(py))
    assert r.returncode == 0, r.stderr
    text = py.read_text(encoding="utf-8")
    doc = tomllib.loads(text)
    assert "# keep me" in text and doc["tool"]["ruff"] == {"line-length": 100}
    assert _deps(text)["torch"] == ["torch ; sys_platform == 'darwin'", "torch==2.11.0 ; sys_platform == 'linux'"]
    assert doc["tool"]["uv"]["sources"]["torch"] == [{"index": "pytorch-cu130", "marker": "sys_platform == 'linux'"}]
    assert "darwin arm64: torch-mps" in r.stderr and "linux x86_64: torch-cuda" in r.stderr
    again = _mlprobe("export", "--to", "uv", "--framework", "torch", "--fleet", str(reports), "--into", str(py))
    assert again.returncode == 0 and py.read_text(encoding="utf-8") == text and "nothing changed" in again.stderr


def test_cli_refusals_are_usage_errors_and_leave_the_file_as_it_was(tmp_path: Path) -> None:
    reports = _reports(tmp_path / "reports", [H200, NOGPU])
    py = tmp_path / "pyproject.toml"
    py.write_text('[project]\nname = "x"\nversion = "0"\n', encoding="utf-8")
    before = py.read_bytes()
    r = _mlprobe("export", "--to", "uv", "--framework", "torch", "--fleet", str(reports), "--into", str(py))
    assert r.returncode == 2 and "E417" in r.stderr and "Traceback" not in r.stderr
    assert py.read_bytes() == before
    r = _mlprobe("export", "--to", "pixi", "--fleet", str(reports))
    assert r.returncode == 2 and "uv only" in r.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    r = _mlprobe("export", "--to", "uv", "--fleet", str(empty))
    assert r.returncode == 2 and "no report files" in r.stderr and "Traceback" not in r.stderr
    (empty / "bad.json").write_text("{not json", encoding="utf-8")
    r = _mlprobe("export", "--to", "uv", "--fleet", str(empty))
    assert r.returncode == 2 and "bad.json" in r.stderr and "Traceback" not in r.stderr
