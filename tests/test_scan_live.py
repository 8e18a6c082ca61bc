"""The live scan on this machine: schema, /proc/cpuinfo flags, OpenCL on PoCL, capture/replay."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from mlprobe.scan.host import LiveHost, ReplayHost, write_bundle
from mlprobe.scan.run import facts_to_report, scan

LINUX = sys.platform.startswith("linux")


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlprobe", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def live_report() -> dict:
    proc = run_cli("scan", "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_live_scan_json_validates(live_report: dict, scan_schema: dict) -> None:
    jsonschema.validate(live_report, scan_schema)
    assert live_report["schema"] == "mlprobe.scan/2"
    assert {p["name"] for p in live_report["probes"]} >= {"cpu", "os", "python", "memory", "opencl", "frameworks"}


@pytest.mark.skipif(not LINUX, reason="/proc/cpuinfo is Linux-only")
def test_cpu_flags_equal_proc_cpuinfo(live_report: dict) -> None:
    text = Path("/proc/cpuinfo").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith(("flags", "Features")))
    expected = sorted(set(line.split(":", 1)[1].split()))
    assert live_report["cpu"]["flags"] == expected
    threads = sum(1 for ln in text.splitlines() if ln.startswith("processor"))
    assert live_report["cpu"]["threads"] == threads
    if "avx" not in expected and os.uname().machine == "x86_64":
        assert any("AVX" in w for w in live_report["warnings"])


def _pocl_available() -> bool:
    try:
        import importlib.util

        return importlib.util.find_spec("pyopencl") is not None
    except ImportError:
        return False


@pytest.mark.skipif(not _pocl_available(), reason="pyopencl is not installed (install the opencl-cpu extra)")
def test_opencl_cpu_device_is_a_runtime_not_a_gpu(live_report: dict) -> None:
    ocl = live_report["runtimes"]["opencl"]
    assert ocl is not None, live_report["probes"]
    devices = [d for p in ocl["platforms"] for d in p["devices"]]
    cpu_devs = [d for d in devices if d["type"] == "CPU"]
    assert cpu_devs, f"no OpenCL CPU device: {devices}"
    assert any("Portable Computing Language" in (p["name"] or "") for p in ocl["platforms"])
    assert all(isinstance(d["compute_units"], int) and d["compute_units"] >= 1 for d in cpu_devs)
    # A PoCL CPU device never becomes a GPU.
    assert not [g for g in live_report["gpus"] if "opencl" in g["apis"] and g["vendor"] in ("amd", "intel")
                and "pthread" in (g["name"] or "")]
    gpu_devs = [d for d in devices if d["type"] == "GPU"]
    assert len([g for g in live_report["gpus"] if "opencl" in g["apis"]]) <= len(gpu_devs)


def _comparable(report: dict) -> dict:
    report = json.loads(json.dumps(report))
    report.pop("source", None)
    for p in report["probes"]:
        p["seconds"] = 0
    report["memory"]["available_bytes"] = None  # moves between two readings
    return report


def test_live_scan_and_replay_of_its_capture_agree(tmp_path: Path) -> None:
    host = LiveHost()
    live = facts_to_report(scan(host))
    write_bundle(host, tmp_path / "bundle")  # same host: same captures (cached)
    replay = facts_to_report(scan(ReplayHost(tmp_path / "bundle")))
    live_c, replay_c = _comparable(live), _comparable(replay)
    # probes that were absent live are absent in replay, and vice versa
    assert [(p["name"], p["status"]) for p in live_c["probes"]] == [(p["name"], p["status"]) for p in replay_c["probes"]]
    live_c.pop("probes"), replay_c.pop("probes")
    assert live_c == replay_c


@pytest.mark.slow
def test_capture_command_writes_bundle_and_refuses_non_empty(tmp_path: Path) -> None:
    out = tmp_path / "cap"
    proc = run_cli("capture", str(out))
    assert proc.returncode == 0, proc.stderr
    names = {p.name for p in out.iterdir()}
    assert "host.json" in names
    if LINUX:
        assert "proc-cpuinfo.txt" in names
    host_doc = json.loads((out / "host.json").read_text())
    assert {"system", "release", "version", "machine", "python_version", "python_implementation"} <= set(host_doc)
    again = run_cli("capture", str(out))
    assert again.returncode == 2
    assert "not an empty folder" in again.stderr and "Traceback" not in again.stderr
    rep = run_cli("scan", "--replay", str(out), "--json")
    assert rep.returncode == 0, rep.stderr
    assert json.loads(rep.stdout)["source"]["kind"] == "replay"


def test_replay_of_missing_folder_is_a_clear_error(tmp_path: Path) -> None:
    proc = run_cli("scan", "--replay", str(tmp_path / "nope"))
    assert proc.returncode == 2
    assert "cannot replay" in proc.stderr and "next:" in proc.stderr and "Traceback" not in proc.stderr


def test_human_output_has_cpu_line_and_tables() -> None:
    proc = run_cli("scan")
    assert proc.returncode == 0, proc.stderr
    assert "CPU" in proc.stdout and "x86-64-v" in proc.stdout or "arm" in proc.stdout.lower()
    assert "Runtimes" in proc.stdout


def test_schema_command_prints_the_schema(scan_schema: dict) -> None:
    proc = run_cli("schema")
    assert proc.returncode == 0
    assert json.loads(proc.stdout) == scan_schema
