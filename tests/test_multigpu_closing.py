"""scripts/multigpu_closing.py: the closing note of a multi-GPU live run, from what the run writes."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sys
from pathlib import Path

from mlprobe.cli import main

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import multigpu_closing  # noqa: E402


def _cli(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["-q", *argv]) == 0
    return out.getvalue()


def test_closing_note_from_a_replayed_eight_gpu_machine(tmp_path: Path) -> None:
    bundle = ROOT / "fixtures" / "linux-nvidia-v100-x8-dgx1-hybrid-cube-mesh-topo"
    (tmp_path / "scan.json").write_text(_cli("scan", "--replay", str(bundle), "--json"))
    (tmp_path / "plan.json").write_text(_cli("plan", "--replay", str(bundle), "--json"))
    hidden = tmp_path / "hidden"
    shutil.copytree(bundle, hidden)
    (hidden / "host.json").write_text(json.dumps({"system": "Linux", "env": {"CUDA_VISIBLE_DEVICES": "0"}}))
    (tmp_path / "plan-hidden.json").write_text(_cli("plan", "--replay", str(hidden), "--json"))
    shutil.copy(ROOT / "fixtures" / "verify-linux-nvidia-h200-torch-2.11-cu130" / "result.json",
                tmp_path / "verify.json")
    (tmp_path / "commands.txt").write_text("python -m mlprobe scan --json\n")
    note = multigpu_closing.closing(tmp_path)
    assert "## scan: 8 NVIDIA GPU(s)" in note
    assert "GPU links: NVLink between 16 of 28 GPU pairs (NV1, NV2)" in note
    assert "| 7 | None | None | ? | None | None / 20-39,60-79 | NV1, NV2, SYS |" in note
    assert "- torch -> torch-cuda: 8 of 8 GPU(s)" in note
    assert "- torch -> torch-cuda: 1 of 8 GPU(s) ['cuda:0']" in note and "hides 7 of the 8 GPUs" in note
    assert "| cuda:0 | NVIDIA H200 | ACCELERATED |" in note
    assert "Slower than peers (> 20 %): none" in note
    assert "python -m mlprobe scan --json" in note


def test_missing_outputs_are_said(tmp_path: Path) -> None:
    note = multigpu_closing.closing(tmp_path)
    assert "(scan.json missing)" in note and "(verify.json missing)" in note
