"""`mlprobe fleet merge|show` and the fleet report: grouping by hardware, drift against the group's
majority, the plan per group, the shipped JSON Schema, and hostile input files (each a clear error
naming the file, never a traceback)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Set, Tuple

import jsonschema
import pytest

from mlprobe.cli import main
from mlprobe.fleet.document import fleet_schema
from mlprobe.fleet.merge import merge_reports

from .fleet_gen import OLD_DRIVER, TEMPLATES, template_reports, write_fleet


@pytest.fixture(scope="module")
def templates() -> List[Dict[str, Any]]:
    return template_reports()


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory, templates: List[Dict[str, Any]]
              ) -> Tuple[Path, Dict[str, int], Set[Tuple[str, str]]]:
    folder = tmp_path_factory.mktemp("fleet")
    membership, drift = write_fleet(folder, 800, driver_every=9, torch_every=7, templates=templates)
    return folder, membership, drift


@pytest.mark.slow
def test_merge_groups_identical_nodes_and_finds_every_injected_drift(
        generated: Tuple[Path, Dict[str, int], Set[Tuple[str, str]]]) -> None:
    folder, membership, injected = generated
    kinds = [f for _, f in injected]
    assert kinds.count("driver") > 30 and kinds.count("framework:torch") > 10
    doc = merge_reports([str(folder)])
    jsonschema.validate(doc, fleet_schema())
    assert doc["summary"]["nodes"] == 800 and doc["summary"]["by_status"] == {"ok": 800}
    # one group per template (distinct hardware), holding exactly that template's nodes
    assert len(doc["groups"]) == len(TEMPLATES)
    for g in doc["groups"]:
        assert len({membership[n] for n in g["nodes"]}) == 1
        assert g["count"] == len(g["nodes"])
    assert sum(g["count"] for g in doc["groups"]) == 800
    found = {(d["node"], d["field"]) for d in doc["drift"]}
    assert found == injected
    for d in doc["drift"]:
        if d["field"] == "driver":
            assert d["value"] == OLD_DRIVER and d["majority"] != OLD_DRIVER
        else:
            assert d["value"].startswith("torch 2.10.0") and d["majority"].startswith(("torch 2.11.0", "torch 2.13.0"))
    assert doc["summary"]["drift_nodes"] == len({n for n, _ in injected})


def test_plan_per_group(templates: List[Dict[str, Any]], tmp_path: Path) -> None:
    write_fleet(tmp_path, len(TEMPLATES), templates=templates)
    doc = merge_reports([str(tmp_path)])
    by_label = {g["label"]: g for g in doc["groups"]}
    h200 = next(g for label, g in by_label.items() if "1x NVIDIA H200 " in label)
    assert h200["plan"]["torch"]["recipe"] == "torch-cuda"
    assert h200["installed"][0]["status"] == "ok"
    rx = next(g for label, g in by_label.items() if "6700 XT" in label)
    # AMD's own wheels have gfx1031 kernels: no override needed (the override recipe is the fallback)
    assert rx["plan"]["torch"]["recipe"] == "torch-rocm-amd"
    assert rx["plan"]["torch"]["env"] == {}
    old = next(g for label, g in by_label.items() if "Opteron" in label)
    assert old["plan"]["tensorflow"] is None  # no AVX: no TensorFlow wheel fits
    assert old["plan"]["torch"]["recipe"] == "torch-cpu"
    # verify speeds travel with the node
    node = next(n for n in doc["nodes"] if n["group"] == h200["id"])
    speeds = {v["device"]: v["images_per_s"] for v in node["facts"]["verify"]}
    assert speeds["cuda:0"] > 50_000 and 2_000 < speeds["cpu"] < 3_000


def test_majority_tie_does_not_depend_on_order(templates: List[Dict[str, Any]], tmp_path: Path) -> None:
    from .fleet_gen import with_driver

    h200 = templates[0]
    for i, doc in enumerate([h200, with_driver(h200, OLD_DRIVER)]):
        (tmp_path / f"a{i}.json").write_text(json.dumps(doc))
    (tmp_path / "b").mkdir()
    for i, doc in enumerate([with_driver(h200, OLD_DRIVER), h200]):
        (tmp_path / "b" / f"a{i}.json").write_text(json.dumps(doc))
    one = merge_reports([str(tmp_path)])
    two = merge_reports([str(tmp_path / "b")])
    assert one["groups"][0]["software"]["driver"]["majority"] == two["groups"][0]["software"]["driver"]["majority"]
    assert one["groups"][0]["software"]["driver"]["contested"] is True


def test_cli_merge_show_and_json(templates: List[Dict[str, Any]], tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "reports"
    write_fleet(folder, 40, driver_every=3, torch_every=1000, templates=templates)
    out = tmp_path / "fleet.json"
    assert main(["fleet", "merge", str(folder), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["fleet", "show", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Groups (same hardware)" in text and "NVIDIA H200" in text and "Drift" in text
    # the plan cell wraps at 100 columns ("torch:" and "torch-cuda" may sit on two of its lines)
    assert OLD_DRIVER in text and "torch:" in text and "torch-cuda" in text
    assert main(["fleet", "show", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, fleet_schema())
    assert doc == json.loads(out.read_text())
    assert main(["schema", "fleet"]) == 0
    assert json.loads(capsys.readouterr().out)["properties"]["schema"] == {"const": "mlprobe.fleet/2"}


def _bad_files(tmp: Path, good: bytes) -> Dict[str, Tuple[Path, str]]:
    """name -> (path, what the error must say)."""
    cases: Dict[str, Tuple[Path, str]] = {}

    def put(name: str, data: bytes, says: str) -> None:
        p = tmp / name
        p.write_bytes(data)
        cases[name] = (p, says)

    put("empty.json", b"", "empty")
    put("truncated.json", good[: len(good) // 2], "not JSON")
    put("latin1.json", b'{"scan": "caf\xe9"}', "not UTF-8")
    put("list.json", b"[1, 2, 3]", "expected a JSON object")
    put("deep.json", b"[" * 200_000 + b"]" * 200_000, "nested too deeply")
    put("newer.json", json.dumps({"report_version": 7, "scan": {}}).encode(), "newer")
    put("wrongtype.json", json.dumps({"report_version": 1, "scan": {"gpus": {"a": 1}}}).encode(),
        "scan.gpus is a JSON object")
    put("notreport.json", b'{"hello": "world"}', "no scan")
    p = tmp / "huge.json"
    with open(p, "wb") as fh:  # sparse: larger than any report, costs no disk
        fh.truncate(65 * 1024 * 1024)
    cases["huge.json"] = (p, "larger than 64 MiB")
    fifo = tmp / "fifo.json"
    os.mkfifo(fifo)
    cases["fifo.json"] = (fifo, "not a regular file")
    cases["missing.json"] = (tmp / "missing.json", "no such file")
    return cases


def test_hostile_inputs_name_the_file(templates: List[Dict[str, Any]], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    good = json.dumps(templates[0]).encode()
    (tmp_path / "good.json").write_bytes(good)
    (tmp_path / "bad").mkdir()
    for name, (path, says) in _bad_files(tmp_path / "bad", good).items():
        code = main(["fleet", "merge", str(tmp_path / "good.json"), str(path)])
        err = capsys.readouterr().err
        assert code == 2, name
        assert "E902" in err and name in err and says in err, (name, err)
        assert "Traceback" not in err
    # --skip-bad keeps the good one and lists the rest
    assert main(["fleet", "merge", "--skip-bad", "--json", str(tmp_path / "good.json"), str(tmp_path / "bad")]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["summary"]["nodes"] == 1
    assert len(doc["warnings"]) == 10  # every *.json in the folder (the missing one is not there)
    assert "truncated.json" in captured.err


def test_non_utf8_file_names(templates: List[Dict[str, Any]], tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    folder = os.fsencode(tmp_path) + b"/caf\xe9-nodes"
    os.mkdir(folder)
    good = json.dumps(templates[0]).encode()
    with open(folder + b"/n\xff\xfe1.json", "wb") as fh:
        fh.write(good)
    with open(folder + b"/bad-\xff.json", "wb") as fh:
        fh.write(b"{nope")
    # as a shell passes them: bytes decoded with surrogateescape
    arg = os.fsdecode(folder)
    assert main(["fleet", "merge", arg]) == 2
    err = capsys.readouterr().err
    assert "bad-\\xff.json" in err and "not JSON" in err
    assert main(["fleet", "merge", "--skip-bad", "--json", arg]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [n["name"] for n in doc["nodes"]] == ["n\\xff\\xfe1"]
    json.dumps(doc, ensure_ascii=False).encode("utf-8")  # no lone surrogates anywhere


def test_show_rejects_what_is_not_a_fleet_report(templates: List[Dict[str, Any]], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    node = tmp_path / "node.json"
    node.write_text(json.dumps(templates[0]))
    assert main(["fleet", "show", str(node)]) == 2
    assert "fleet merge" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"fleet_version": 1, "summary": {}, "nodes": [{"x": 1}], "groups": [], "drift": []}))
    assert main(["fleet", "show", str(broken)]) == 2
    err = capsys.readouterr().err
    assert "E906" in err and "Traceback" not in err
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"fleet_version": 2}))
    assert main(["fleet", "show", str(newer)]) == 2
    assert "newer" in capsys.readouterr().err


def test_the_groups_table_names_the_builds_the_registry_names() -> None:
    """`fleet show` names the builds of the frameworks the registry marks for it (frameworks' `fleet`:
    jaxlib is JAX's, onnxruntime-gpu ONNX Runtime's) and counts the others."""
    from mlprobe.fleet.model import SoftwareField
    from mlprobe.fleet.render import _software_text
    from mlprobe.model.vocabulary import vocabulary

    assert {"torch", "tensorflow", "jax", "jaxlib", "onnxruntime-gpu"} <= set(vocabulary().fleet_builds())
    assert "torchvision" not in vocabulary().fleet_builds()
    software = {"driver": SoftwareField("580.95.05", 2, 1, False), "cuda": SoftwareField("13.0", 1, 2, True),
                "framework:jaxlib": SoftwareField("jaxlib 0.8.0", 2, 1, False),
                "framework:torchvision": SoftwareField("torchvision 0.26.0", 2, 1, False)}
    assert _software_text(software) == "driver 580.95.05; cuda 13.0 (contested); jaxlib 0.8.0; +1 more"
