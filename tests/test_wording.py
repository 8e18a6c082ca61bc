"""Words a newcomer reads: counts in the singular and plural instead of "(s)" or "?", one bracket
level, a reason where nothing ran, a retired road in one line, each GPU use said once, and errors
that speak of the command that was run."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from typing import Any, Dict, List

from mlprobe.render.verify_terminal import render_verify, rows
from mlprobe.ui import count

from .conftest import FIXTURES, ROOT


def mlprobe(*argv: str) -> "subprocess.CompletedProcess[str]":
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("MLPROBE_REPLAY", None)
    return subprocess.run([sys.executable, "-m", "mlprobe", *argv], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=240)


def test_counts_are_words() -> None:
    assert [count(0, "device"), count(1, "platform"), count(2, "core"), count(None, "core")] == \
        ["0 devices", "1 platform", "2 cores", "cores unknown"]


def test_scan_says_no_s_in_brackets_and_no_question_marks() -> None:
    for case in ("linux-nvidia-h200-mlprobe-capture", "linux-amd-mi300x-x4-rocminfo-rocm-smi",
                 "windows-nvidia-rtx3090-dxdiag"):
        out = mlprobe("scan", "--replay", str(FIXTURES / case)).stdout
        assert "(s)" not in out and "? cores" not in out and "ROCm ?" not in out, out


def test_plan_says_each_gpu_use_once_and_a_retired_road_in_one_line() -> None:
    out = mlprobe("plan", "--replay", str(FIXTURES / "linux-nvidia-h200-mlprobe-capture")).stdout
    gpus = [ln for ln in out.splitlines() if ln.startswith("GPUs:")]
    assert gpus and len(gpus) == len(set(gpus)), gpus
    assert not any(re.search(r"uses 1:", ln) for ln in gpus), gpus
    out = mlprobe("plan", "--replay", str(FIXTURES / "linux-nogpu-xeon-gold-6230-avx512")).stdout
    lines = out.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("retired: intel-nervana-neon"))
    block = [lines[i]] + [ln for ln in lines[i + 1:i + 4] if ln.startswith("  ")]
    assert len(block) <= 3, block  # one line, wrapped at 100 columns at most twice
    assert "today:" in " ".join(block) and "security issues" not in out


def _verify_doc() -> Dict[str, Any]:
    path = FIXTURES / "verify-linux-x86-64-torch-2.13-cpu" / "result.json"
    doc: Dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return doc


def test_verify_names_a_device_with_one_level_of_brackets() -> None:
    doc = _verify_doc()
    doc["results"][0]["name"] = "CPU (2 threads)"
    table: List[List[str]] = rows(doc)
    assert "((" not in table[0][1] and "))" not in table[0][1] and "CPU (2 threads)" in table[0][1]


def test_verify_prints_no_legend_when_nothing_ran() -> None:
    doc = _verify_doc()
    buf = io.StringIO()
    render_verify(doc, stream=buf)
    assert "float64 CPU reference" in buf.getvalue()
    doc["results"] = []
    buf = io.StringIO()
    render_verify(doc, stream=buf)
    assert "float64 CPU reference" not in buf.getvalue() and "ACCELERATED =" not in buf.getvalue()


def test_a_report_says_why_verify_has_no_results() -> None:
    from mlprobe.report.markdown import verify_lines

    class Result:
        results: tuple = ()
        summary = ("no framework is installed in /venv/bin/python",)

    class Section:
        result = Result()
        missing = None

    assert verify_lines(Section()) == ["nothing was measured: no framework is installed in /venv/bin/python"]  # type: ignore[arg-type]


def test_doctor_with_a_missing_python_does_not_speak_of_verify() -> None:
    cp = mlprobe("doctor", "--python", "/nonexistent/python")
    assert cp.returncode == 2 and "E601" in cp.stderr and "verify" not in cp.stderr, cp.stderr


def test_a_reports_frameworks_row_says_whose_python_it_is() -> None:
    out = mlprobe("report", "--replay", str(FIXTURES / "linux-nvidia-h200-mlprobe-capture"), "--format",
                  "markdown").stdout
    rows = [ln for ln in out.splitlines() if "**Frameworks" in ln]
    assert rows and all(re.match(r"\| \*\*Frameworks \(/[^)]*python[^)]*\)\*\* \|", ln) for ln in rows), rows
