"""Every command mlprobe prints is one a person can paste: each word quoted for its shell, so a real
device name such as `Intel(R) Arc(TM) A770 Graphics` gives a valid bash line, and a hostile one
(quotes, `$(...)`, backticks, `;`) runs nothing. PlaidML device ids are kept to the characters real
device names give them; a name outside that alphabet is left out with a warning, never written into
`~/.plaidml` or `PLAIDML_DEVICE_IDS`."""

from __future__ import annotations

import copy
import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict, List

import pytest

from mlprobe.plan.planner import make_plan
from mlprobe.scan.host import ReplayHost
from mlprobe.scan.run import facts_to_report, scan

from .conftest import FIXTURES

BASH = shutil.which("bash")
needs_bash = pytest.mark.skipif(BASH is None, reason="bash is not installed")
# A real OpenCL GPU device name (Intel's compute runtime on an Arc A770) and a hostile one.
ARC = "Intel(R) Arc(TM) A770 Graphics"
HOSTILE = "x' \"$(touch pwned-1)\" `touch pwned-2`; touch pwned-3 #"


def report_with_gpu_named(name: str, system: str = "Linux") -> Dict[str, Any]:
    """The scan of a real machine with one OpenCL GPU (an Intel HD Graphics, Intel's SDK), the
    device renamed: what the planner sees when clinfo names the device so."""
    rep = facts_to_report(scan(ReplayHost(FIXTURES / "linux-intel-hd-graphics-haswell-intel-sdk-clinfo")))
    rep = copy.deepcopy(rep)
    for p in rep["runtimes"]["opencl"]["platforms"]:
        for d in p["devices"]:
            if d["type"] == "GPU":
                d["name"] = name
    rep["os"]["system"] = system
    return rep


def plaidml_entry(name: str, system: str = "Linux") -> Dict[str, Any]:
    plan = make_plan(report_with_gpu_named(name, system), framework="keras")
    entry = next(r for r in plan["recommended"] if r["recipe"] == "plaidml-keras")
    assert isinstance(entry, dict)
    return entry


def bash_check(line: str) -> None:
    assert BASH is not None
    p = subprocess.run([BASH, "-n", "-c", line], capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, f"bash -n rejects {line!r}: {p.stderr}"


def run_bash(lines: List[str], home: Path) -> Dict[str, str]:
    """Run the lines as a person pasting them would (the python steps left out), in a folder of
    their own, then print the variables they set."""
    assert BASH is not None
    script = "\n".join(lines + ['printf "%s\\0" "$PLAIDML_DEVICE_IDS" "$KERAS_BACKEND" "$PLAIDML_EXPERIMENTAL"'])
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    p = subprocess.run([BASH, "-c", script], capture_output=True, cwd=home, env=env, timeout=20)
    assert p.returncode == 0, p.stderr
    ids, backend, experimental = p.stdout.decode("utf-8").split("\0")[:3]
    return {"PLAIDML_DEVICE_IDS": ids, "KERAS_BACKEND": backend, "PLAIDML_EXPERIMENTAL": experimental}


@needs_bash
def test_the_real_arc_name_gives_valid_bash_lines(tmp_path: Path) -> None:
    e = plaidml_entry(ARC)
    assert e["env"]["PLAIDML_DEVICE_IDS"] == "opencl_intel_arc(tm)_a770_graphics.0"
    for line in e["commands"]:
        bash_check(line)
    pasted = [c for c in e["commands"] if not c.startswith("python ")]
    got = run_bash(pasted, tmp_path)
    assert got["PLAIDML_DEVICE_IDS"] == "opencl_intel_arc(tm)_a770_graphics.0"
    assert got["KERAS_BACKEND"] == "plaidml.keras.backend"
    settings = json.loads((tmp_path / ".plaidml").read_text(encoding="utf-8"))
    assert settings["PLAIDML_DEVICE_IDS"] == ["opencl_intel_arc(tm)_a770_graphics.0"]


@needs_bash
def test_a_hostile_device_name_runs_nothing_and_is_left_out(tmp_path: Path) -> None:
    e = plaidml_entry(HOSTILE)
    for line in e["commands"]:
        bash_check(line)
    run_bash([c for c in e["commands"] if not c.startswith("python ")], tmp_path)
    assert not list(tmp_path.glob("pwned-*")), "a pasted step ran a command from the device name"
    # the hostile id is no PlaidML id: not chosen, and the plan says why
    assert e["env"]["PLAIDML_DEVICE_IDS"] == "llvm_cpu.0"
    assert any("left out" in w and "plaidml-setup" in w for w in e["warnings"]), e["warnings"]
    assert not any("pwned" in c for c in e["commands"])


@needs_bash
@pytest.mark.parametrize("value", [HOSTILE, "a'b", "$HOME", "`id`", "x\ny", "tab\there", "back\\slash", "", "-n"])
def test_posix_quoting_keeps_any_value_one_word(tmp_path: Path, value: str) -> None:
    from mlprobe.model import shell

    script = "\n".join([shell.set_env("V", value), shell.write_file("~/out.txt", value),
                        shell.posix(["printf", "%s", value]) + " > argv.txt"])
    assert BASH is not None
    p = subprocess.run([BASH, "-c", script], capture_output=True, cwd=tmp_path, timeout=10,
                       env={"HOME": str(tmp_path), "PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == value + "\n"
    assert (tmp_path / "argv.txt").read_text(encoding="utf-8") == value
    assert not list(tmp_path.glob("pwned-*"))


def ps_single_quoted(text: str) -> str:
    """PowerShell's reading of one single-quoted string literal (about_Quoting_Rules: '' is a quote;
    U+2018, U+2019, U+201A and U+201B are quote characters too): its value, or AssertionError when
    the literal ends before the text does."""
    quotes = "'\u2018\u2019\u201a\u201b"
    assert text[0] in quotes
    out, i = [], 1
    while i < len(text):
        c = text[i]
        if c in quotes:
            if i + 1 < len(text) and text[i + 1] in quotes:
                out.append(c)
                i += 2
                continue
            assert i == len(text) - 1, f"the string ends early in {text!r}"
            return "".join(out)
        out.append(c)
        i += 1
    raise AssertionError(f"unterminated {text!r}")


@pytest.mark.parametrize("value", [HOSTILE, "it's", "\u2019smart\u2018 quotes\u201a\u201b", "$env:PATH", "`n"])
def test_powershell_quoting_keeps_any_value_one_string(value: str) -> None:
    from mlprobe.model import shell

    line = shell.set_env("V", value, windows=True)
    assert line.startswith("$env:V = ")
    assert ps_single_quoted(line[len("$env:V = "):]) == value


def test_windows_steps_use_powershell_quoting() -> None:
    e = plaidml_entry(ARC, system="Windows")
    ids = "opencl_intel_arc(tm)_a770_graphics.0"
    assert f"$env:PLAIDML_DEVICE_IDS = '{ids}'" in e["commands"]
    write = next(c for c in e["commands"] if c.startswith("Set-Content"))
    text = write.split(" -Value ", 1)[1]
    assert json.loads(ps_single_quoted(text))["PLAIDML_DEVICE_IDS"] == [ids]
    assert not any(c.startswith("export ") or c.startswith("printf ") for c in e["commands"])


@needs_bash
def test_every_printed_command_of_every_fixture_plan_is_valid_bash() -> None:
    """The recipes' packages with extras and markers (`tensorflow[and-cuda]`), mirrors, settings files:
    all quoted."""
    lines = set()
    for name in ("linux-nvidia-h100-smi", "linux-amd-rx6700xt-gfx1031-hsa-override-rocminfo",
                 "linux-intel-hd-graphics-haswell-intel-sdk-clinfo", "darwin-apple-m4-max-sysctl",
                 "linux-nogpu-amd-opteron-8354-no-avx"):
        rep = facts_to_report(scan(ReplayHost(FIXTURES / name)))
        plan = make_plan(rep, framework="any")
        for r in plan["recommended"]:
            lines.update(r["commands"])
        for f in plan["installed"]:
            lines.update(c for c in f.get("fix", []) if not c.startswith("#"))
    assert any("[" in ln for ln in lines)
    for line in sorted(lines):
        bash_check(line)
        assert shlex.split(line)  # one command, words as a POSIX shell splits them


@needs_bash
def test_install_steps_quote_the_venv_path(tmp_path: Path) -> None:
    from mlprobe.install.apply import TargetEnv, plan_steps
    from mlprobe.install.backends import Sources
    from mlprobe.install.index import Target
    from mlprobe.install.steps import InstallPlan

    venv = tmp_path / "my venvs" / "it's $(touch pwned-1)"
    plan = InstallPlan(recipe="torch-cpu", title="t", framework="torch", backend="cpu", device="cpu",
                       packages=["torch"], recipe_index_url=None, recipe_extra_index_urls=[], variant_label=None,
                       sources=Sources(index_url="http://127.0.0.1:9/simple", origin="--index-url"))
    env = TargetEnv("new-venv", venv, "/usr/bin/python3", None, Target("3.11", ()))
    steps = plan_steps(plan, env, None, ["torch"])
    line = next(s.command for s in steps if s.kind == "venv")
    assert line is not None
    bash_check(line)
    assert shlex.split(line) == ["/usr/bin/python3", "-m", "venv", str(venv)]
    verify = next(s.text for s in steps if s.kind == "verify")
    assert str(venv / "bin" / "python") in shlex.split(verify.split("`")[1])


def _doctor_fixes(bundle: Path) -> List[str]:
    from mlprobe import pipeline

    result = pipeline.doctor(ReplayHost(bundle), source={"kind": "replay", "bundle": bundle.name}, env={})
    return [line for f in result.to_json()["findings"] for line in f["fix"]]


def _hostile_bundles(tmp: Path, value: str) -> List[Path]:
    """Three real-shaped bundles whose doctor findings put a captured value into a fix line: a
    LD_LIBRARY_PATH folder, the group of /dev/nvidia0, the file libOpenCL.so.1 resolves to."""
    out = []
    ld = tmp / "ld"
    shutil.copytree(FIXTURES / "synthetic-linux-nvidia-h200-ld-library-path-system-cuda", ld)
    host = json.loads((ld / "host.json").read_text(encoding="utf-8"))
    host["env"]["LD_LIBRARY_PATH"] = f"/usr/local/cuda-12.3/lib64:/opt/{value}/lib"
    (ld / "host.json").write_text(json.dumps(host), encoding="utf-8")
    out.append(ld)
    node = tmp / "node"
    shutil.copytree(FIXTURES / "synthetic-linux-nvidia-h200-device-node-not-accessible", node)
    text = (node / "ls-l-dev.txt").read_text(encoding="utf-8")
    (node / "ls-l-dev.txt").write_text(text.replace("root video", "root vid$(touch${IFS}pwned-4)eo"), encoding="utf-8")
    out.append(node)
    ocl = tmp / "ocl"
    shutil.copytree(FIXTURES / "synthetic-linux-nvidia-h200-opencl-loaders-differ", ocl)
    doc = json.loads((ocl / "opencl-icd.json").read_text(encoding="utf-8"))
    doc["loader"][0]["path"] = f"/usr/local/{value}/libOpenCL.so.1"
    (ocl / "opencl-icd.json").write_text(json.dumps(doc), encoding="utf-8")
    out.append(ocl)
    return out


@needs_bash
@pytest.mark.parametrize("value", [HOSTILE, "Intel(R) oneAPI"])
def test_doctor_fix_lines_quote_what_they_read_from_the_machine(tmp_path: Path, value: str) -> None:
    """Pasted as they are, doctor's fix lines run the commands they name and nothing from the capture:
    every program they call is a stub here, and the stub `touch` leaves a mark if a value ran it."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name in ("sudo", "mkdir", "ln", "python", "mlprobe", "dmesg", "grep", "modprobe", "nvidia-modprobe"):
        (stubs / name).write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
        (stubs / name).chmod(0o755)
    (stubs / "touch").write_text('#!/bin/sh\n: > "$HOME/ran-touch"\n', encoding="utf-8")
    (stubs / "touch").chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    lines: List[str] = []
    for bundle in _hostile_bundles(tmp_path / "bundles", value):
        fixes = _doctor_fixes(bundle)
        assert fixes, bundle.name
        lines += fixes
    assert any(value in line or shlex.quote(value) in line or "vid" in line for line in lines)
    for line in lines:
        bash_check(line)
        assert BASH is not None
        p = subprocess.run([BASH, "-c", line], capture_output=True, text=True, cwd=home, timeout=10,
                           env={"HOME": str(home), "PATH": str(stubs), "LOGNAME": "me"})
        assert not (home / "ran-touch").exists(), f"pasting {line!r} ran a command from the capture"
        assert "syntax error" not in p.stderr, (line, p.stderr)


def test_no_printed_step_points_into_mlprobes_own_installation() -> None:
    """A step must work when pasted into the target environment, where mlprobe's own files are not
    (pipx, another venv, a wheel cache): no command names a path of the mlprobe package, its shims
    folder or the shim module; the PlaidML shim is written by `mlprobe install` itself."""
    import mlprobe

    own = os.path.dirname(os.path.abspath(mlprobe.__file__))
    lines = []
    names = [p.name for p in sorted(FIXTURES.iterdir()) if p.is_dir() and (p / "host.json").is_file()]
    for name in names:
        rep = facts_to_report(scan(ReplayHost(FIXTURES / name)))
        for fw in ("any", "keras"):
            plan = make_plan(rep, framework=fw)
            for r in plan["recommended"] + plan.get("alternatives", []):
                lines.extend(r.get("commands", []))
            for f in plan["installed"]:
                lines.extend(f.get("fix", []))
    assert any("--settings-only" in ln for ln in lines), "no fixture plan has a shim or settings step"
    for line in lines:
        assert own not in line and "plaidml_compat" not in line and "shims/" not in line, line
