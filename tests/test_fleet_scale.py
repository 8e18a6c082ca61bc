"""`fleet merge` at scale: the one-pass reader (fleet/fastread.py, msgspec into typed structs) gives
the same fleet report as the careful reader of every field (Python's decoder, check_document,
summarize of the whole dict); the streamed JSON of a large fleet is the same document; any --jobs
gives the same report; and a report the structs do not describe (a scan JSON, a wrong type where the
summary reads leniently, a capture bundle, numbers out of range) is read the careful way."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Set, Tuple

import pytest

from mlprobe.cli import main
from mlprobe.fleet import fastread
from mlprobe.fleet.document import build_fleet
from mlprobe.fleet.load import iter_names, load_many, select_inputs
from mlprobe.fleet.merge import merge
from mlprobe.fleet.model import FleetNode, FleetSource

from .fleet_gen import template_reports, write_fleet


@pytest.fixture(scope="module")
def templates() -> List[Dict[str, Any]]:
    return template_reports()


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory, templates: List[Dict[str, Any]]
              ) -> Tuple[Path, Dict[str, int], Set[Tuple[str, str]]]:
    folder = tmp_path_factory.mktemp("fleet")
    membership, drift = write_fleet(folder, 640, driver_every=9, torch_every=7, templates=templates)
    return folder, membership, drift


def careful(paths: List[str]) -> Dict[str, Any]:
    """The fleet report the way fleet merge read every file before the one-pass reader."""
    files, notes = select_inputs(paths)
    loaded, _ = load_many(files)
    names = dict(iter_names([item.path for item in loaded]))
    nodes = [FleetNode(name=names[i.path], file=i.path, status="ok", facts=i.summary) for i in loaded]
    return build_fleet(nodes, FleetSource(kind="merge", files=len(files), seconds=0.0), notes,
                       now="2026-01-01T00:00:00Z").to_json()


def timeless(doc: Dict[str, Any]) -> Dict[str, Any]:
    doc = json.loads(json.dumps(doc))
    doc["source"]["seconds"] = 0.0
    return doc


@pytest.mark.slow
def test_one_pass_reader_gives_the_careful_readers_report(generated: Tuple[Path, Dict[str, int], Set[Tuple[str, str]]]
                                                          ) -> None:
    folder, _, injected = generated
    merged = merge([str(folder)], now="2026-01-01T00:00:00Z", jobs=1)
    doc = timeless(merged.document().to_json())
    assert doc == timeless(careful([str(folder)]))
    assert {(d["node"], d["field"]) for d in doc["drift"]} == injected
    # nodes of the same report share one summary: far fewer summaries than nodes
    assert len(merged.summaries) < 40 < len(merged.names) == 640
    # the streamed JSON (what -o and --json write for a large fleet) is the same document
    streamed = json.loads(b"".join(merged.chunks()))
    assert timeless(streamed) == doc
    assert b"".join(merged.chunks(batch=7)) == b"".join(merged.chunks())


@pytest.mark.slow
def test_every_jobs_count_writes_the_same_report(generated: Tuple[Path, Dict[str, int], Set[Tuple[str, str]]],
                                                 tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder, _, _ = generated
    out: Dict[int, Dict[str, Any]] = {}
    for jobs in (1, 2, 3):
        f = tmp_path / f"fleet-{jobs}.json"
        assert main(["fleet", "merge", str(folder), "-o", str(f), "--jobs", str(jobs)]) == 0
        doc = json.loads(f.read_text(encoding="utf-8"))
        doc["source"]["seconds"], doc["generated_at"] = 0.0, ""
        out[jobs] = doc
    assert out[1] == out[2] == out[3]
    assert out[1]["summary"]["nodes"] == 640
    assert main(["fleet", "merge", str(folder), "--jobs", "0"]) == 2
    assert "not a number of processes" in capsys.readouterr().err


@pytest.mark.slow
def test_a_bad_file_among_many_is_named_with_any_jobs(generated: Tuple[Path, Dict[str, int], Set[Tuple[str, str]]],
                                                      tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder, _, _ = generated
    bad = tmp_path / "zz-broken.json"
    bad.write_bytes(b'{"scan": {"cpu": NaN}}')
    for jobs in ("1", "2"):
        assert main(["fleet", "merge", str(folder), str(bad), "--jobs", jobs, "--json"]) == 2
        err = capsys.readouterr().err
        assert "E902" in err and "zz-broken.json" in err and "Traceback" not in err
        assert main(["fleet", "merge", str(folder), str(bad), "--jobs", jobs, "--json", "--skip-bad"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["summary"]["nodes"] == 640 and any("zz-broken.json" in w for w in doc["warnings"])


def _variants(base: Dict[str, Any]) -> Dict[str, Tuple[str, bool]]:
    """name -> (the file's text, whether the one-pass reader takes it itself)."""
    def edit(fn: Any) -> str:
        d = json.loads(json.dumps(base))
        fn(d)
        return json.dumps(d)

    def gpu_name(d: Dict[str, Any]) -> None:
        d["scan"]["gpus"][0]["name"] = "x" * 1000

    return {
        "as written": (json.dumps(base), True),
        "a long name (cut by the summary)": (edit(gpu_name), True),
        "scan JSON": (json.dumps(base["scan"]), False),
        "plan.top of another type (read leniently)": (edit(lambda d: d["plan"].update(top={"torch": 5})), False),
        "an installed finding that is not an object": (
            edit(lambda d: d["plan"].update(installed=["odd"])), False),
        "a capture bundle": (edit(lambda d: d.update(capture_bundle={"files": {"a.txt": {"text": "x"}}})), False),
        "a 64-bit id": (edit(lambda d: d["scan"]["gpus"][0].update(memory_bytes=2 ** 64 - 1)), True),
        "a lone surrogate escape": (json.dumps(base).replace('"scan"', '"x": "\\ud800", "scan"', 1), False),
    }


def test_what_the_structs_do_not_describe_is_read_the_careful_way(templates: List[Dict[str, Any]],
                                                                   tmp_path: Path) -> None:
    base = templates[0]
    for name, (text, fast) in _variants(base).items():
        f = tmp_path / "node.json"
        f.write_text(text, encoding="utf-8")
        assert (fastread.fast_report(f.read_bytes()) is not None) is fast, name
        got = merge([str(f)], now="2026-01-01T00:00:00Z").document().to_json()
        assert timeless(got) == timeless(careful([str(f)])), name


def test_numbers_out_of_range_in_what_the_fleet_reads_are_refused_the_careful_way(templates: List[Dict[str, Any]]
                                                                                  ) -> None:
    text = json.dumps(templates[0])
    assert fastread.fast_report(text.encode()) is not None
    for literal in ("1e999", "1" * 5000, "1" + "0" * 400, str(2 ** 64), "NaN", "-Infinity"):
        d = json.loads(text)
        d["scan"]["gpus"][0]["memory_bytes"] = "@@"
        assert fastread.fast_report(json.dumps(d).replace('"@@"', literal).encode()) is None, literal
    deep = b'{"scan": {"cpu": ' + b"[" * 5000 + b"]" * 5000 + b"}}"
    assert fastread.fast_report(deep) is None


def test_a_number_out_of_range_in_a_field_the_fleet_does_not_read(templates: List[Dict[str, Any]], tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """msgspec skips such a field unbuilt; the document is read the careful way, which refuses it
    naming the field, as the careful reader alone does (with or without --embed-reports)."""
    for literal in ("1e999", "-2.5E+308", "1" * 30, str(2 ** 64)):
        d = json.loads(json.dumps(templates[0]))
        d["scan"]["memory"] = {"total_bytes": "@@"}
        f = tmp_path / "node.json"
        f.write_text(json.dumps(d).replace('"@@"', literal), encoding="utf-8")
        assert fastread.fast_report(f.read_bytes()) is None, literal
        for extra in ([], ["--embed-reports"]):
            assert main(["fleet", "merge", str(f), "--json", *extra]) == 2, (literal, extra)
            err = capsys.readouterr().err
            assert "scan.memory.total_bytes" in err and "Traceback" not in err, (literal, extra)


def test_hex_strings_and_small_exponents_stay_on_the_fast_way(templates: List[Dict[str, Any]]) -> None:
    """A GPU's UUID ("GPU-...3e456...") or a number such as 1e99 is not out of range: the one-pass reader
    keeps such a document (the fleet benchmark's reports carry UUIDs)."""
    d = json.loads(json.dumps(templates[0]))
    d["scan"]["memory"] = {"uuid": "GPU-3e456a-7e1234-ee000", "ratio": "@@"}
    text = json.dumps(d).replace('"@@"', "1e99")
    assert fastread.fast_report(text.encode()) is not None


def test_ray_missing_is_a_clear_error(generated: Tuple[Path, Dict[str, int], Set[Tuple[str, str]]],
                                      monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    folder, _, _ = generated
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    assert main(["fleet", "merge", str(folder), "--ray"]) == 2
    err = capsys.readouterr().err
    assert "E903" in err and "Ray is not installed" in err and "leave out --ray" in err
    assert "Traceback" not in err


def test_an_unreachable_cluster_is_a_clear_error(generated: Tuple[Path, Dict[str, int], Set[Tuple[str, str]]],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("ray")
    import socket

    with socket.socket() as s:  # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    folder, _, _ = generated
    assert main(["fleet", "merge", str(folder), "--ray", "--address", f"127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err
    assert "E904" in err and f"127.0.0.1:{port}" in err and "leave out --ray" in err
    assert "Traceback" not in err
    assert main(["fleet", "merge", str(folder), "--address", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert "--address is for --ray" in err and "E910" in err
    assert main(["fleet", "merge", str(folder), "--ray", "--embed-reports"]) == 2
    assert "E910" in capsys.readouterr().err


@pytest.mark.slow
def test_merge_on_a_local_ray_cluster_of_three_nodes(generated: Tuple[Path, Dict[str, int], Set[Tuple[str, str]]],
                                                     tmp_path: Path) -> None:
    """`fleet merge --ray` on a real cluster of this machine (a head and two more nodes, one CPU each):
    the same report as --jobs 1, its files read by tasks spread over the nodes."""
    pytest.importorskip("ray", reason="Ray is not installed (python -m pip install -e '.[ray]')")
    import os
    import subprocess

    from .conftest import ROOT
    from .ray_cluster import LocalRayCluster

    folder, _, _ = generated
    c = LocalRayCluster()
    try:
        c.start_head("head")
        c.add_node("w1")
        c.add_node("w2")
        c.wait_nodes(3)
        env = {k: v for k, v in os.environ.items() if k not in ("MLPROBE_REPLAY", "RAY_ADDRESS")}
        out = tmp_path / "ray.json"
        proc = subprocess.run([sys.executable, "-m", "mlprobe", "fleet", "merge", str(folder), "--ray",
                               "--address", c.address, "-o", str(out)],
                              capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
    finally:
        c.stop()
    local = tmp_path / "local.json"
    assert main(["fleet", "merge", str(folder), "--jobs", "1", "-o", str(local)]) == 0
    docs = []
    for f in (out, local):
        d = json.loads(f.read_text(encoding="utf-8"))
        d["source"]["seconds"], d["generated_at"] = 0.0, ""
        docs.append(d)
    assert docs[0] == docs[1] and docs[0]["summary"]["nodes"] == 640
