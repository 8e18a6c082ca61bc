"""`mlprobe export`: pixi's manifest and conda's overrides for replayed machines (checked with the
conda ecosystem's own library, py-rattler), --into edits that keep the user's file or refuse with the
file byte-identical, credentials never written, and bad input as clear errors."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from mlprobe import pipeline
from mlprobe.export.archspec_name import microarchitecture
from mlprobe.export.decide import decide
from mlprobe.install.steps import pick
from mlprobe.scan.host import open_replay

try:
    import tomllib  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]

ROOT = Path(__file__).resolve().parent.parent
H200 = str(ROOT / "fixtures" / "linux-nvidia-h200-mlprobe-capture")
NOGPU = str(ROOT / "fixtures" / "linux-nogpu-amd-epyc-zen5-mlprobe-capture")
RX6700 = str(ROOT / "fixtures" / "linux-amd-rx6700xt-gfx1031-hsa-override-rocminfo")


def _mlprobe(*args: str, cwd: Optional[Path] = None, env: Optional[Dict[str, str]] = None
             ) -> subprocess.CompletedProcess[str]:
    e = dict(os.environ if env is None else env)
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    for k in [k for k in e if k.startswith("MLPROBE_") and k != "MLPROBE_PYTORCH_INDEX_URL"]:
        e.pop(k)
    return subprocess.run([sys.executable, "-m", "mlprobe", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env=e)


def test_pixi_for_the_h200_capture_parses_and_carries_its_cuda() -> None:
    r = _mlprobe("export", "--to", "pixi", "--replay", H200, "--framework", "torch")
    assert r.returncode == 0, r.stderr
    doc = tomllib.loads(r.stdout)
    assert doc["system-requirements"]["cuda"] == "13.0"  # the driver's CUDA (580.159.04)
    assert doc["system-requirements"]["libc"] == {"family": "glibc", "version": "2.39"}
    assert doc["workspace"]["platforms"] == ["linux-64"]
    assert doc["dependencies"]["python"] == "3.12.*"
    # pixi's per-package index (prefix-dev/pixi docs/reference/pixi_manifest.md, `index`)
    assert doc["pypi-dependencies"]["torch"] == {"version": "==2.11.0", "index": "https://download.pytorch.org/whl/cu130"}


def test_conda_prints_key_value_lines_for_the_h200_capture() -> None:
    r = _mlprobe("export", "--to", "conda", "--replay", H200, "--framework", "torch")
    assert r.returncode == 0, r.stderr
    lines = dict(ln.split("=", 1) for ln in r.stdout.splitlines())
    assert lines["CONDA_OVERRIDE_CUDA"] == "13.0" and lines["CONDA_OVERRIDE_GLIBC"] == "2.39"
    assert lines["CONDA_SUBDIR"] == "linux-64" and lines["CONDA_OVERRIDE_ARCHSPEC"] == "icelake"
    assert "pytorch-gpu" in r.stderr and "cuda-version<=13.0" in r.stderr  # the environment.yml


def _virtual_packages(overrides: Dict[str, str]) -> Dict[str, str]:
    """rattler's own detection, in a child with only these overrides set: {name: "version build"}."""
    code = ("from rattler import VirtualPackage\n"
            "from rattler.virtual_package import VirtualPackageOverrides\n"
            "for v in VirtualPackage.detect(VirtualPackageOverrides.from_env()):\n"
            "    g = v.into_generic(); print(g.name.normalized, g.version, g.build_string)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONDA_")}
    env.update(overrides)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    return {ln.split(" ", 1)[0]: ln.split(" ", 1)[1] for ln in r.stdout.splitlines()}


@pytest.mark.skipif(platform.system() != "Linux", reason="rattler detects __glibc on Linux only")
def test_rattler_sees_the_captured_machine_through_the_overrides() -> None:
    pytest.importorskip("rattler", reason="py-rattler (the test extra) is not installed")
    r = _mlprobe("export", "--to", "conda", "--replay", H200, "--framework", "torch")
    assert r.returncode == 0, r.stderr
    overrides = dict(ln.split("=", 1) for ln in r.stdout.splitlines())
    found = _virtual_packages(overrides)
    assert found["__cuda"] == "13.0 0", found
    assert found["__glibc"] == "2.39 0", found
    assert found["__archspec"] == "1 icelake", found
    # a machine without a CUDA driver: an empty override means no __cuda, even on a GPU machine
    r = _mlprobe("export", "--to", "conda", "--replay", NOGPU, "--framework", "torch")
    overrides = dict(ln.split("=", 1) for ln in r.stdout.splitlines())
    assert overrides["CONDA_OVERRIDE_CUDA"] == ""
    found = _virtual_packages(overrides)
    assert "__cuda" not in found and found["__glibc"] == "2.36 0" and found["__archspec"] == "1 x86_64_v4", found


@pytest.mark.skipif(platform.system() != "Linux" or platform.machine() != "x86_64", reason="x86-64 Linux")
def test_the_archspec_name_of_a_live_scan_is_archspecs_own() -> None:
    import archspec.cpu

    from mlprobe.scan.host import shared_live_host

    facts = pipeline.scan_report(shared_live_host())
    assert microarchitecture(facts) == archspec.cpu.host().name


def test_a_capture_without_a_gpu_exports_the_cpu_build_and_says_so() -> None:
    r = _mlprobe("export", "--to", "uv", "--replay", NOGPU, "--framework", "torch")
    assert r.returncode == 0, r.stderr
    assert "no GPU a framework could use" in r.stderr and "CPU build" in r.stderr
    doc = tomllib.loads(r.stdout)
    assert doc["tool"]["uv"]["index"][0]["name"] == "pytorch-cpu"


def test_rocm_builds_bring_the_packages_only_that_index_has() -> None:
    facts = pipeline.scan_report(open_replay(RX6700))
    exp = decide(facts, pick(pipeline.plan(facts, framework="torch", env={}), "torch-rocm"))
    deps = {p.name: p for p in exp.pins}
    assert {"torch", "pytorch-triton-rocm", "triton-rocm"} <= set(deps), deps
    assert deps["pytorch-triton-rocm"].dependency == "pytorch-triton-rocm ; sys_platform == 'linux'"
    assert all(p.index == exp.indexes[0].name for p in exp.pins)


PROJECT = """\
# keep me
[project]
name = "demo"
version = "0.1.0"
requires-python = ">=3.9"
dependencies = ["numpy>=1"]  # mine

[tool.ruff]
line-length = 99
"""


def test_into_keeps_the_file_is_idempotent_and_names_the_python_gap(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(PROJECT, encoding="utf-8")
    r = _mlprobe("export", "--to", "uv", "--replay", H200, "--framework", "torch", "--into", str(path))
    assert r.returncode == 0, r.stderr
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# keep me\n") and "[tool.ruff]\nline-length = 99\n" in text
    doc = tomllib.loads(text)
    assert doc["project"]["dependencies"] == ["numpy>=1", "torch==2.11.0"]
    assert doc["tool"]["uv"]["sources"]["torch"] == [
        {"index": "pytorch-cu130", "marker": "sys_platform == 'linux' or sys_platform == 'win32'"}]
    assert "3.9" in r.stderr and "environments" in r.stderr  # cu130 has no wheels for 3.9
    assert "required-environments" in r.stderr
    again = _mlprobe("export", "--to", "uv", "--replay", H200, "--framework", "torch", "--into", str(path))
    assert again.returncode == 0 and again.stdout == "" and "nothing changed" in again.stderr
    assert path.read_text(encoding="utf-8") == text


@pytest.mark.parametrize("content, ref", [
    ("[project\nname = 'x'\n", "E412"),
    ("[project]\nname = 'x'\ndependencies = []\n[tool.uv.sources]\ntorch = { index = 'pytorch-cpu' }\n", "E413"),
    ("[tool.ruff]\nline-length = 1\n", "E416"),
])
def test_into_refuses_and_leaves_the_file_byte_identical(tmp_path: Path, content: str, ref: str) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_bytes(content.encode())
    r = _mlprobe("export", "--to", "uv", "--replay", H200, "--framework", "torch", "--into", str(path))
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert f"[{ref}]" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert path.read_bytes() == content.encode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyproject.toml"]


def test_force_replaces_another_pin(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text("[project]\nname = 'x'\nversion = '0'\ndependencies = ['torch']\n"
                    "[tool.uv.sources]\ntorch = { index = 'pytorch-cpu' }\n", encoding="utf-8")
    r = _mlprobe("export", "--to", "uv", "--replay", H200, "--framework", "torch", "--into", str(path), "--force")
    assert r.returncode == 0, r.stderr
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    assert doc["tool"]["uv"]["sources"]["torch"][0]["index"] == "pytorch-cu130"
    assert doc["project"]["dependencies"] == ["torch==2.11.0"]


def test_pixi_into_a_pyproject_goes_under_tool_pixi(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(PROJECT, encoding="utf-8")
    r = _mlprobe("export", "--to", "pixi", "--replay", H200, "--framework", "torch", "--into", str(path))
    assert r.returncode == 0, r.stderr
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    assert doc["tool"]["pixi"]["system-requirements"]["cuda"] == "13.0"
    assert doc["project"]["dependencies"] == ["numpy>=1"]  # pixi's tables only
    again = _mlprobe("export", "--to", "pixi", "--replay", H200, "--framework", "torch", "--into", str(path))
    assert again.returncode == 0 and again.stdout == ""


def test_an_index_url_with_credentials_is_never_written(tmp_path: Path) -> None:
    env = dict(os.environ, MLPROBE_PYTORCH_INDEX_URL="https://alice:s3cret@mirror.example/whl")
    path = tmp_path / "pyproject.toml"
    path.write_text(PROJECT, encoding="utf-8")
    r = _mlprobe("export", "--to", "uv", "--replay", NOGPU, "--framework", "torch", "--into", str(path), env=env)
    assert r.returncode == 0, r.stderr
    text = path.read_text(encoding="utf-8")
    assert "s3cret" not in text and "alice" not in text and "s3cret" not in r.stdout + r.stderr
    assert 'url = "https://mirror.example/whl/cpu"' in text
    assert "UV_INDEX_PYTORCH_CPU_USERNAME" in r.stderr and "UV_INDEX_PYTORCH_CPU_PASSWORD" in r.stderr
    p = _mlprobe("export", "--to", "pixi", "--replay", NOGPU, "--framework", "torch", env=env)
    assert p.returncode == 0 and "s3cret" not in p.stdout + p.stderr


def test_an_unknown_tool_lists_the_accepted_values() -> None:
    r = _mlprobe("export", "--to", "poetry", "--replay", H200)
    assert r.returncode == 2 and "[E411]" in r.stderr
    for tool in ("uv", "pixi", "conda"):
        assert tool in r.stderr
    assert "Traceback" not in r.stderr


def test_the_recipe_settings_go_to_a_dotenv_and_the_hook_command_is_printed(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(PROJECT, encoding="utf-8")
    (tmp_path / ".env").write_text("MINE=1\n", encoding="utf-8")
    r = _mlprobe("export", "--to", "uv", "--replay", RX6700, "--recipe", "torch-rocm", "--into", str(path))
    assert r.returncode == 0, r.stderr
    env_text = (tmp_path / ".env").read_text(encoding="utf-8")
    assert env_text.startswith("MINE=1\n") and "HSA_OVERRIDE_GFX_VERSION=10.3.0" in env_text, env_text
    assert "mlprobe install --recipe torch-rocm --venv .venv --settings-only" in r.stderr
    lines: List[str] = tomllib.loads(path.read_text(encoding="utf-8"))["project"]["dependencies"]
    assert "pytorch-triton-rocm ; sys_platform == 'linux'" in lines
