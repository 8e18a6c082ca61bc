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
