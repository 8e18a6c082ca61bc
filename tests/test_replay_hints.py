"""On a replay, what mlprobe suggests is for the captured machine: the next commands keep --replay
(or say MLPROBE_REPLAY is set), install and verify are said to run there, "no recipe fits" names the
captured machine, an error never names a flag that was not passed, a Windows capture is never given
this machine's Linux platform, and scan and plan agree on a capture that holds no GPU listing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List, Dict, Optional

from .conftest import FIXTURES, ROOT

H100 = "fixtures/linux-nvidia-h100-smi"
S390X = "fixtures/linux-nogpu-s390x-z13-lpar-drawer-cpuinfo"
WINDOWS = "fixtures/windows-nvidia-rtx3090-dxdiag"
APPLE_SYSCTL = "fixtures/darwin-apple-m4-max-sysctl"
TORCH_CPU_ON_H200 = "fixtures/synthetic-linux-nvidia-h200-torch-cpu-build"


def mlprobe(*args: str, env: Optional[Dict[str, str]] = None) -> "subprocess.CompletedProcess[str]":
    e = {k: v for k, v in os.environ.items() if not k.startswith("MLPROBE_")}
    e.update(COLUMNS="400", PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, "-m", "mlprobe", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env=e)


def _logical(out: str) -> List[str]:
    """The output's lines with their wrapped continuations (indented lines under them) joined back:
    a pipe gets at most 100 columns whatever COLUMNS says."""
    lines: List[str] = []
    for ln in out.splitlines():
        if lines and ln.startswith("  ") and lines[-1] and not lines[-1].startswith(" "):
            lines[-1] += " " + ln.strip()
        else:
            lines.append(ln)
    return lines


def _next(out: str) -> str:
    return next(ln for ln in _logical(out) if ln.startswith("next"))


def test_scan_replay_hint_keeps_replay() -> None:
    r = mlprobe("scan", "--replay", H100)
    assert r.returncode == 0, r.stderr
    hint = _next(r.stdout)
    assert f"`mlprobe plan --replay {H100}`" in hint and f"`mlprobe scan --replay {H100} --json`" in hint
    live = _next(mlprobe("scan").stdout)
    assert live == "next: `mlprobe plan` for what fits, `mlprobe scan --json` for machines"


def test_scan_hint_under_mlprobe_replay_needs_no_flag() -> None:
    r = mlprobe("scan", env={"MLPROBE_REPLAY": H100})
    assert r.returncode == 0 and "MLPROBE_REPLAY is set" in r.stderr
    assert "--replay" not in _next(r.stdout)


def test_plan_replay_suggests_nothing_that_acts_on_this_machine() -> None:
    r = mlprobe("plan", "--replay", H100)
    assert r.returncode == 0, r.stderr
    hint = _next(r.stdout)
    assert hint.startswith("next, on the captured machine: `mlprobe install --recipe ID --apply`, then `mlprobe verify`")
    assert f"`mlprobe install --replay {H100} --recipe ID` shows the steps" in hint
    assert f"`mlprobe plan --replay {H100} --why-not ID`" in hint
    verify_lines = [ln for ln in r.stdout.splitlines() if "mlprobe verify --framework" in ln]
    assert verify_lines and all("verify (on the captured machine): mlprobe verify" in ln for ln in verify_lines)
    retired = next(ln for ln in r.stdout.splitlines() if ln.startswith("also retired"))
    assert f"mlprobe plan --replay {H100} --why-not ID" in retired


def test_plan_replay_fixes_are_for_the_captured_machine() -> None:
    r = mlprobe("plan", "--replay", TORCH_CPU_ON_H200)
    fixes = [ln.strip() for ln in r.stdout.splitlines() if ln.strip().startswith("fix")]
    assert fixes and all(f.startswith("fix (on the captured machine):") for f in fixes), fixes
    live = mlprobe("plan", env={"MLPROBE_OVERRIDE_CPU_FLAGS": "sse sse2"})
    assert not any("on the captured machine" in ln for ln in live.stdout.splitlines())


def test_plan_under_mlprobe_replay_says_so() -> None:
    r = mlprobe("plan", env={"MLPROBE_REPLAY": H100})
    hint = _next(r.stdout)
    assert "here (MLPROBE_REPLAY is set): `mlprobe install --recipe ID` shows the steps" in hint
    assert "--replay" not in hint


def test_no_recipe_fits_names_the_captured_machine() -> None:
    r = mlprobe("plan", "--replay", S390X, "--framework", "torch")
    assert r.returncode == 3
    assert "No recipe fits the captured machine for --framework torch" in r.stdout
    live = mlprobe("plan", "--framework", "tensorflow", env={"MLPROBE_OVERRIDE_CPU_FLAGS": "sse sse2"})
    assert live.returncode == 3 and "No recipe fits this machine for --framework tensorflow" in live.stdout


def test_apply_under_mlprobe_replay_names_the_variable_not_a_flag() -> None:
    r = mlprobe("install", "--apply", env={"MLPROBE_REPLAY": H100})
    assert r.returncode == 2 and "[E512]" in r.stderr
    assert "--apply with MLPROBE_REPLAY (set in the environment)" in r.stderr
    assert "--replay" not in r.stderr.replace("MLPROBE_REPLAY", "")
    assert "unset MLPROBE_REPLAY" in r.stderr
    flag = mlprobe("install", "--apply", "--replay", H100)
    assert flag.returncode == 2 and "--apply with --replay" in flag.stderr and "leave out --replay" in flag.stderr


def test_a_windows_capture_gets_a_windows_platform_not_this_machines() -> None:
    r = mlprobe("install", "--replay", WINDOWS, "--recipe", "plaidml-keras")
    out = r.stdout + r.stderr
    assert "win_amd64" in out and not re.search(r"\blinux_|manylinux", out), out
    plan = mlprobe("plan", "--replay", WINDOWS)
    for here in (str(ROOT), sys.executable, str(Path.home()) + "/"):
        assert here not in plan.stdout
    commands = [ln for ln in plan.stdout.splitlines() if "$ " in ln]
    assert commands and not any(re.search(r"\$ .*(?<![\w:])/(?:usr|home|root|tmp|work)/", c) for c in commands)


def test_scan_and_plan_agree_on_a_capture_without_a_gpu_listing() -> None:
    scan = mlprobe("scan", "--replay", APPLE_SYSCTL).stdout
    gpus = next(ln for ln in _logical(scan) if ln.startswith("GPUs"))
    assert gpus.startswith("GPUs not in this capture") and "none found" not in gpus
    assert "integrated Apple GPU" in gpus and "`mlprobe plan` assumes" in gpus
    plan = mlprobe("plan", "--replay", APPLE_SYSCTL).stdout
    assert "an integrated Apple GPU is assumed" in plan
    # a capture that lists PCI devices and finds no GPU: none found
    nogpu = mlprobe("scan", "--replay", "fixtures/linux-nogpu-amd-epyc-zen5-mlprobe-capture").stdout
    assert any(ln.startswith("GPUs none found") for ln in nogpu.splitlines())
    assert (FIXTURES / "linux-nogpu-amd-epyc-zen5-mlprobe-capture" / "lspci.txt").is_file()
