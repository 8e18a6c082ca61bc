"""What `fleet merge` and the commands that write a file take as input: an output that is one of the
inputs is refused before anything is written; the same report reached twice counts once; a folder's
`B.JSON` is read and what a folder holds besides reports is named; one node cannot make the fleet
report large (strings and lists are cut per node, and the summary says so)."""

from __future__ import annotations

import json
import re
import os
import shutil
from pathlib import Path
from typing import Any, Dict, List

import pytest

from mlprobe.cli import main
from mlprobe.fleet.merge import merge_reports

from .conftest import FIXTURES
from .fleet_gen import OLD_DRIVER, template_reports, with_driver


@pytest.fixture(scope="module")
def templates() -> List[Dict[str, Any]]:
    return template_reports()


def _write(path: Path, doc: Dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _refused(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "E005" in err and "also an input" in err and "Traceback" not in err, err
    return err


def test_an_output_that_is_an_input_is_refused(templates: List[Dict[str, Any]], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    reports = tmp_path / "reports"
    n1 = _write(reports / "node1.json", templates[0])
    _write(reports / "node2.json", templates[1])
    before = n1.read_bytes()
    # merge into one of the reports, named or through the folder
    assert main(["fleet", "merge", str(reports), "-o", str(n1)]) == 2
    _refused(capsys)
    assert main(["fleet", "merge", str(n1), str(reports / "node2.json"), "-o", str(reports / "." / "node1.json")]) == 2
    _refused(capsys)
    assert n1.read_bytes() == before
    fleet = tmp_path / "fleet.json"
    assert main(["fleet", "merge", str(reports), "-o", str(fleet)]) == 0
    capsys.readouterr()
    fleet_bytes = fleet.read_bytes()
    # show's page onto the fleet report itself, also through a symbolic link and a hard link
    link = tmp_path / "link.json"
    link.symlink_to(fleet)
    hard = tmp_path / "hard.json"
    os.link(fleet, hard)
    for out in (fleet, link, hard):
        assert main(["fleet", "show", str(fleet), "--html", str(out)]) == 2
        _refused(capsys)
    assert fleet.read_bytes() == fleet_bytes
    # a report written over the report it replays, or into the bundle it replays
    r = tmp_path / "r.json"
    assert main(["report", "--replay", str(FIXTURES / "linux-nvidia-h100-smi"), "--include-raw", "-o", str(r)]) == 0
    capsys.readouterr()
    kept = r.read_bytes()
    assert main(["report", "--replay", str(r), "-o", str(r)]) == 2
    _refused(capsys)
    assert r.read_bytes() == kept
    bundle = shutil.copytree(FIXTURES / "linux-nvidia-h100-smi", tmp_path / "bundle")
    smi = next(p for p in bundle.iterdir() if p.name.startswith("nvidia-smi"))
    smi_bytes = smi.read_bytes()
    assert main(["labels", "--replay", str(bundle), "-o", str(smi)]) == 2
    _refused(capsys)
    assert main(["report", "--replay", str(bundle), "-o", str(smi)]) == 2
    _refused(capsys)
    assert smi.read_bytes() == smi_bytes
    # install's transcript appended to the recipe file it installs (or the lock, or a replayed file)
    recipe = tmp_path / "recipe.json"
    recipe.write_text('{"recipe": "demo", "title": "t", "framework": "demo", "packages": ["six"]}')
    recipe_bytes = recipe.read_bytes()
    assert main(["install", "--recipe-file", str(recipe), "--log", str(recipe), "--apply",
                 "--venv", str(tmp_path / "never")]) == 2
    _refused(capsys)
    assert main(["install", "--framework", "torch", "--replay", str(bundle), "--log", str(smi)]) == 2
    _refused(capsys)
    assert recipe.read_bytes() == recipe_bytes and smi.read_bytes() == smi_bytes
    assert not (tmp_path / "never").exists()
    # a new file beside the inputs is fine
    assert main(["fleet", "merge", str(reports), "-o", str(reports / "fleet.json")]) == 0


def test_the_same_report_twice_counts_once(templates: List[Dict[str, Any]], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Two copies of an old-driver node beside one honest node would outvote it."""
    honest = _write(tmp_path / "a" / "honest.json", templates[0])
    odd = _write(tmp_path / "b" / "odd.json", with_driver(templates[0], OLD_DRIVER))
    link = tmp_path / "b" / "again.json"
    link.symlink_to(odd)
    os.link(odd, tmp_path / "b" / "hardlink.json")
    code = main(["fleet", "merge", "--json", str(honest), str(odd), str(odd), "./" + os.path.relpath(odd),
                 str(tmp_path / "b")])
    assert code == 0
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    assert doc["summary"]["nodes"] == 2, [n["name"] for n in doc["nodes"]]
    assert doc["source"]["files"] == 2
    assert sum("same file" in w and "counted once" in w for w in doc["warnings"]) == 5, doc["warnings"]
    assert "counted once" in cap.err
    # a tie of one against one: contested, not decided for the copies
    drift = doc["drift"]
    assert drift and all(d.get("contested") for d in drift), drift


def test_a_folder_reads_any_case_of_json_and_names_what_it_leaves_out(
        templates: List[Dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "reports"
    _write(folder / "a.json", templates[0])
    _write(folder / "B.JSON", templates[1])
    _write(folder / "c.Json", templates[2])
    (folder / "notes.txt").write_text("gathered by ssh\n")
    (folder / "d.json.bak").write_text("{}")
    (folder / ".hidden.json").write_text("{}")
    assert main(["fleet", "merge", "--json", str(folder)]) == 0
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    assert sorted(n["name"] for n in doc["nodes"]) == ["B", "a", "c"]
    left = [w for w in doc["warnings"] if "not named *.json" in w]
    assert len(left) == 1 and "notes.txt" in left[0] and "d.json.bak" in left[0] and "2 file(s)" in left[0], left
    assert "notes.txt" in cap.err


def test_one_node_cannot_make_the_fleet_report_large(templates: List[Dict[str, Any]], tmp_path: Path) -> None:
    big = json.loads(json.dumps(templates[0]))
    big["scan"]["gpus"] = big["scan"]["gpus"][:1] * 500
    big["scan"]["gpus"][0] = dict(big["scan"]["gpus"][0], name="H" * (8 * 1024 * 1024))
    big["scan"]["cpu"]["model"] = "C" * 100_000
    big["scan"]["frameworks"] = [{"name": f"pkg{i}", "version": "1.0"} for i in range(50_000)]
    big["plan"]["top"].update({f"fw{i}": None for i in range(5000)})
    big["plan"]["recommended"][0]["env"] = {f"V{i}": "x" * 1000 for i in range(2000)}
    big["plan"]["recommended"][0]["packages"] = ["p" * 1000] * 2000
    files = [_write(tmp_path / f"n{i}.json", big) for i in range(3)] + [_write(tmp_path / "ok.json", templates[1])]
    doc = merge_reports([str(f) for f in files])
    text = json.dumps(doc)
    assert len(text) < 1_000_000, f"{len(text)} characters for 4 nodes"
    facts = doc["nodes"][0]["facts"]
    assert len(facts["gpus"]) == 64 and len(facts["frameworks"]) == 256
    assert len(facts["gpus"][0]["name"]) <= 256 and len(facts["cpu"]["model"]) <= 256
    capped = " ".join(facts["capped"])
    assert "scan.gpus: 500 entries" in capped and "scan.frameworks: 50000 entries" in capped
    assert "cut" in capped
    assert "capped" not in doc["nodes"][3]["facts"]  # an ordinary report is whole


def test_a_tie_is_decided_by_version_and_shown_contested_everywhere(
        templates: List[Dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two H200 nodes, drivers 580.159.04 and 580.95.05: as text 580.95.05 sorts last and was called
    the majority; as versions 580.159.04 is the newer. Either way it is a tie, and every view says so."""
    from mlprobe.fleet.html import render_html

    a = _write(tmp_path / "r" / "a.json", with_driver(templates[0], "580.95.05"))
    b = _write(tmp_path / "r" / "b.json", with_driver(templates[0], "580.159.04"))
    fleet = tmp_path / "fleet.json"
    assert main(["fleet", "merge", str(a), str(b), "-o", str(fleet)]) == 0
    doc = json.loads(fleet.read_text(encoding="utf-8"))
    drift = [d for d in doc["drift"] if d["field"] == "driver"]
    assert [(d["node"], d["value"], d["majority"], d["contested"]) for d in drift] == \
        [("a", "580.95.05", "580.159.04", True)]
    assert doc["groups"][0]["software"]["driver"]["contested"] is True
    capsys.readouterr()
    assert main(["fleet", "show", str(fleet)]) == 0
    out = capsys.readouterr().out
    # the software cell wraps at 100 columns: "580.159.04" and "(contested)" on two lines of it
    assert "contested: a tie" in out and re.search(r"580\.159\.04\s[^\n]*\n[^\n]*\(contested\)", out), out
    html = render_html(doc)
    assert html.count("contested") >= 2
    # a real majority is not contested, whatever the versions
    c = _write(tmp_path / "r" / "c.json", with_driver(templates[0], "580.95.05"))
    doc = merge_reports([str(a), str(b), str(c)])
    drift = [d for d in doc["drift"] if d["field"] == "driver"]
    assert [(d["node"], d["majority"], d["contested"]) for d in drift] == [("b", "580.95.05", False)]


def test_version_order() -> None:
    from mlprobe.fleet.group import version_order

    assert version_order("580.159.04") > version_order("580.95.05")
    assert version_order("torch 2.11.0 cu130") > version_order("torch 2.9.1 cu130")
    assert version_order("535.54.03, 580.95.05") > version_order("535.54.03")
    # Debian package versions are no PEP 440 versions: their numbers still compare as numbers
    assert version_order("550.100.01-1ubuntu1") > version_order("550.54.15-1ubuntu1")
    assert version_order("6.4.1-1~22.04") > version_order("6.4.0-10~22.04")
    sorted([version_order(v) for v in ("580.95.05", "550.54.15-1ubuntu1", "abc", "", "1.0+cu130")])  # no TypeError
