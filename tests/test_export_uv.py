"""`mlprobe export --to uv --into pyproject.toml`, then the real uv: `uv lock`, `uv sync` and a later
`uv add` in a fresh project, against a local index of PyTorch's own layout (/whl/cpu, the real torch
CPU wheel) named by MLPROBE_PYTORCH_INDEX_URL, and a local simple index of the generic packages as
uv's default index (UV_DEFAULT_INDEX; export writes no default index). Nothing leaves 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

from tests.pep503_server import LocalIndex, build_wheel
from tests.uv_path import UV

try:
    import tomllib  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]

pytestmark = [pytest.mark.slow, pytest.mark.skipif(UV is None, reason="uv is not installed (MLPROBE_TEST_UV)")]

ROOT = Path(__file__).resolve().parent.parent
SERIES = f"{sys.version_info.major}.{sys.version_info.minor}"
PYPROJECT = f"""\
# my project: the comment export must keep
[project]
name = "demo"
version = "0.1.0"
requires-python = ">={SERIES},<{sys.version_info.major}.{sys.version_info.minor + 1}"
dependencies = []

[tool.ruff]
line-length = 99  # mine
"""


@dataclass
class Indexes:
    cpu: Path  # /whl/cpu: torch's CPU build only
    default: Path  # the generic packages, an unlabelled torch for the platforms cpu does not serve, goodlib


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Indexes:
    got = tmp_path_factory.mktemp("downloaded")
    r = subprocess.run([sys.executable, "-m", "pip", "download", "--only-binary=:all:", "-q", "-d", str(got),
                        "torch==2.13.0"], capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        pytest.fail(f"pip could not fetch torch==2.13.0 and its dependencies:\n{r.stderr[-2000:]}")
    cpu, default = tmp_path_factory.mktemp("whl-cpu"), tmp_path_factory.mktemp("default-index")
    for w in got.glob("*.whl"):
        shutil.move(str(w), str((cpu if w.name.startswith("torch-") else default) / w.name))
    assert any("+cpu" in w.name for w in cpu.glob("torch-*.whl")), list(cpu.iterdir())
    # the default index's torch, as the real default index serves macOS (no local label, tiny)
    build_wheel(default, "torch", "2.13.0")
    build_wheel(default, "goodlib", "1.0")
    return Indexes(cpu, default)


@pytest.fixture()
def served(wheels: Indexes) -> Iterator[Dict[str, LocalIndex]]:
    with LocalIndex(wheels.cpu, variant="cpu", max_requests=5000, lifetime_s=900) as cpu, \
            LocalIndex(wheels.default, max_requests=5000, lifetime_s=900) as default:
        yield {"cpu": cpu, "default": default}


def _env(served: Dict[str, LocalIndex], home: Path) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_", "VIRTUAL_ENV"))}
    env.update({"MLPROBE_PYTORCH_INDEX_URL": served["cpu"].url, "UV_DEFAULT_INDEX": served["default"].url,
                "UV_CACHE_DIR": str(home / "uv-cache"), "UV_PYTHON": sys.executable, "UV_PYTHON_DOWNLOADS": "never",
                "UV_NO_CONFIG": "1", "XDG_CACHE_HOME": str(home / "cache"), "UV_LINK_MODE": "copy",
                # this checkout's mlprobe, whatever is installed
                "PYTHONPATH": os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])})
    return env


def _run(argv: List[str], cwd: Path, env: Dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _lock_package(project: Path, name: str) -> List[Dict[str, object]]:
    lock = tomllib.loads((project / "uv.lock").read_text(encoding="utf-8"))
    return [p for p in lock["package"] if p["name"] == name]


def test_export_into_a_fresh_project_then_uv_lock_sync_and_add_keep_the_build(
        served: Dict[str, LocalIndex], tmp_path: Path) -> None:
    project = tmp_path / "demo"
    project.mkdir()
    (project / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    env = _env(served, tmp_path)
    export = [sys.executable, "-m", "mlprobe", "export", "--to", "uv", "--framework", "torch",
              "--into", "pyproject.toml"]
    r = _run(export, project, env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "+name = \"pytorch-cpu\"" in r.stdout, r.stdout  # the diff
    assert "--settings-only" in r.stderr and "uv lock" in r.stderr, r.stderr
    text = (project / "pyproject.toml").read_text(encoding="utf-8")
    assert text.startswith("# my project: the comment export must keep\n"), text
    assert "[tool.ruff]\nline-length = 99  # mine\n" in text, text
    doc = tomllib.loads(text)
    cpu_url = served["cpu"].url + "/cpu"
    assert doc["tool"]["uv"]["index"] == [{"name": "pytorch-cpu", "url": cpu_url, "explicit": True}]
    assert doc["tool"]["uv"]["sources"]["torch"][0]["index"] == "pytorch-cpu"
    assert doc["project"]["dependencies"] == ["torch==2.13.0"], doc["project"]

    # a second export changes nothing, byte for byte
    again = _run(export, project, env, timeout=300)
    assert again.returncode == 0 and again.stdout == "", (again.stdout, again.stderr)
    assert (project / "pyproject.toml").read_text(encoding="utf-8") == text

    uv = str(UV)
    lock = _run([uv, "lock"], project, env)
    assert lock.returncode == 0, lock.stderr[-3000:]
    torch = [p for p in _lock_package(project, "torch") if "+cpu" in str(p["version"])]
    assert torch and torch[0]["version"] == "2.13.0+cpu", _lock_package(project, "torch")
    assert torch[0]["source"] == {"registry": cpu_url}, torch[0]
    sync = _run([uv, "sync"], project, env)
    assert sync.returncode == 0, sync.stderr[-3000:]
    version = _run([str(project / ".venv" / "bin" / "python"), "-c", "import torch; print(torch.__version__)"],
                   project, {"PATH": "/usr/bin:/bin"}, timeout=300)
    assert version.stdout.strip() == "2.13.0+cpu", (version.stdout, version.stderr)

    # a later `uv add` of another package keeps torch's source and build
    add = _run([uv, "add", "goodlib"], project, env)
    assert add.returncode == 0, add.stderr[-3000:]
    assert tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["uv"]["sources"]["torch"] \
        == doc["tool"]["uv"]["sources"]["torch"]
    torch_after = [p for p in _lock_package(project, "torch") if "+cpu" in str(p["version"])]
    assert torch_after and torch_after[0]["source"] == {"registry": cpu_url}
    version = _run([str(project / ".venv" / "bin" / "python"), "-c", "import torch, goodlib; print(torch.__version__)"],
                   project, {"PATH": "/usr/bin:/bin"}, timeout=300)
    assert version.stdout.strip() == "2.13.0+cpu", (version.stdout, version.stderr)
