"""Numbers no document of mlprobe's holds (a 5000-digit integer, 1e999, 10**400, NaN, Infinity) are
refused where a document is read, with an error naming the field: `fleet merge`, `fleet show`,
`diff` and `scan --replay REPORT.json`; and mlprobe never writes NaN or Infinity (not JSON)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

from mlprobe.cli import main
from tests.report_doc import build_report
from mlprobe.report.envelope import ReportOptions
from mlprobe.scan.host import ReplayHost

from .conftest import FIXTURES

HOSTILE = {
    "5000 digits": "1" * 5000,
    "1e999": "1e999",
    "10**400": "1" + "0" * 400,
    "Infinity": "Infinity",
    "-Infinity": "-Infinity",
    "NaN": "NaN",
    "2**64": str(2 ** 64),
}


def strict(text: str) -> Any:
    def no(s: str) -> None:
        raise AssertionError(f"{s} written into JSON")
    return json.loads(text, parse_constant=no)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    doc = build_report(ReplayHost(FIXTURES / "linux-nvidia-h200-mlprobe-capture"), ReportOptions(include_raw=True),
                       source={"kind": "replay", "bundle": "h200"}, now="2026-01-01T00:00:00Z")
    doc["verify"] = json.loads((FIXTURES / "verify-linux-nvidia-h200-torch-2.11-cu130" / "result.json").read_text())
    return doc


def with_number(doc: Dict[str, Any], literal: str, where: str = "memory") -> str:
    """The report's JSON text with one number replaced by `literal`, as a file would hold it."""
    d = json.loads(json.dumps(doc))
    if where == "memory":
        d["scan"]["gpus"][0]["memory_bytes"] = "@@N@@"
    else:
        d["verify"]["results"][0]["speed"]["images_per_s"] = "@@N@@"
    return json.dumps(d).replace('"@@N@@"', literal)


def _one_error(err: str, field: str) -> None:
    assert "Traceback" not in err, err
    assert err.startswith("error [E"), err
    assert field in err, err


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_fleet_merge_refuses_and_names_the_field(base: Dict[str, Any], tmp_path: Path, name: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "node.json"
    f.write_text(with_number(base, HOSTILE[name]), encoding="utf-8")
    assert main(["fleet", "merge", str(f), "-o", str(tmp_path / "fleet.json")]) == 2
    _one_error(capsys.readouterr().err, "scan.gpus[0].memory_bytes")
    f.write_text(with_number(base, HOSTILE[name], "speed"), encoding="utf-8")
    assert main(["fleet", "merge", str(f)]) == 2
    _one_error(capsys.readouterr().err, "verify.results[0].speed.images_per_s")


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_diff_and_replay_refuse_and_name_the_field(base: Dict[str, Any], tmp_path: Path, name: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps(base), encoding="utf-8")
    bad = tmp_path / "bad.json"
    bad.write_text(with_number(base, HOSTILE[name]), encoding="utf-8")
    assert main(["diff", str(good), str(bad)]) == 2
    _one_error(capsys.readouterr().err, "scan.gpus[0].memory_bytes")
    assert main(["scan", "--replay", str(bad)]) == 2
    _one_error(capsys.readouterr().err, "scan.gpus[0].memory_bytes")


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_fleet_show_refuses_and_names_the_field(base: Dict[str, Any], tmp_path: Path, name: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "node.json"
    src.write_text(json.dumps(base), encoding="utf-8")
    fleet = tmp_path / "fleet.json"
    assert main(["fleet", "merge", str(src), "-o", str(fleet)]) == 0
    capsys.readouterr()
    doc = json.loads(fleet.read_text(encoding="utf-8"))
    doc["nodes"][0]["facts"]["verify"][0]["images_per_s"] = "@@N@@"
    fleet.write_text(json.dumps(doc).replace('"@@N@@"', HOSTILE[name]), encoding="utf-8")
    for argv in (["fleet", "show", str(fleet)], ["fleet", "show", str(fleet), "--html", str(tmp_path / "f.html")],
                 ["fleet", "show", str(fleet), "--json"]):
        assert main(argv) == 2, argv
        _one_error(capsys.readouterr().err, "nodes[0].facts.verify[0].images_per_s")


def test_what_mlprobe_writes_is_always_json(base: Dict[str, Any], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A non-finite number made in memory (a computation, a Ray task's result) is written as null."""
    from mlprobe.commands.fleet import fleet_json
    from mlprobe.fleet.html import render_html
    from mlprobe.fleet.merge import merge_reports

    src = tmp_path / "node.json"
    src.write_text(json.dumps(base), encoding="utf-8")
    doc = merge_reports([str(src)])
    doc["nodes"][0]["facts"]["verify"][0]["images_per_s"] = float("inf")
    doc["nodes"][0]["seconds"] = float("nan")
    text = fleet_json(doc)
    assert strict(text)["nodes"][0]["facts"]["verify"][0]["images_per_s"] is None
    assert "nan" not in render_html(strict(text)).lower().replace("nanosecond", "")


def test_large_but_real_numbers_still_read(base: Dict[str, Any], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A 64-bit id, 1.5e300, a string that says NaN: documents keep what they can hold."""
    d = json.loads(json.dumps(base))
    d["scan"]["gpus"][0]["memory_bytes"] = 2 ** 63
    d["scan"]["gpus"][0]["name"] = "NaN Infinity 1e999 " + "9" * 30
    f = tmp_path / "node.json"
    f.write_text(json.dumps(d), encoding="utf-8")
    assert main(["fleet", "merge", str(f), "--json"]) == 0
    out: List[Dict[str, Any]] = strict(capsys.readouterr().out)["nodes"]
    assert out[0]["facts"]["gpus"][0]["memory_bytes"] == 2 ** 63


@pytest.mark.parametrize("speed", [1.7e308, 1e300, 5e15])
def test_a_huge_but_finite_speed_draws_a_finite_chart(base: Dict[str, Any], tmp_path: Path, speed: float) -> None:
    """A report may carry any finite number: the fleet page's bars stay finite lengths (1.7e308 made
    width="inf" and x1="inf")."""
    import re

    from mlprobe.fleet.html import render_html
    from mlprobe.fleet.merge import merge_reports

    paths = []
    for i, v in enumerate((speed, 12345.0)):
        d = json.loads(json.dumps(base))
        d["verify"]["results"][0]["speed"]["images_per_s"] = v
        d["scan"]["hostname"] = f"node{i}"
        f = tmp_path / f"n{i}.json"
        f.write_text(json.dumps(d), encoding="utf-8")
        paths.append(str(f))
    page = render_html(strict(json.dumps(merge_reports(paths))))
    chart = page[page.index('<svg id="speed-chart"'):page.index("</svg>")]
    for attr, value in re.findall(r'\b(width|x1|x2|x)="([^"]*)"', chart):
        assert re.fullmatch(r"-?\d+(\.\d+)?", value), (attr, value)
