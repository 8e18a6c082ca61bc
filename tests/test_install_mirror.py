"""`mlprobe install --framework torch --apply` against a local mirror with PyTorch's own layout
(/whl/cpu/<project>/ pages, files beside them), built from the real torch CPU wheel and its
dependencies, served over HTTP on 127.0.0.1. The only source given is MLPROBE_PYTORCH_INDEX_URL,
as a person with a PyTorch mirror would set it; then the same command with the mirror stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator

import pytest

from tests.pep503_server import LocalIndex, free_port_url

pytestmark = pytest.mark.slow

TORCH = "torch==2.13.0"


def _mlprobe_env(index_base: str, home: Path) -> Dict[str, str]:
    env = dict(os.environ)
    env["MLPROBE_PYTORCH_INDEX_URL"] = index_base
    env["XDG_CACHE_HOME"] = str(home / "cache")  # the transcript log stays in the test's folder
    env["PIP_NO_CACHE_DIR"] = "1"
    env.pop("MLPROBE_OVERRIDE_CPU_FLAGS", None)
    return env


@pytest.fixture(scope="module")
def mirror_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real torch CPU wheel and everything it needs, fetched by pip through its own configuration."""
    folder = tmp_path_factory.mktemp("pytorch-mirror")
    r = subprocess.run([sys.executable, "-m", "pip", "download", "--only-binary=:all:", "-q", "-d", str(folder),
                        TORCH], capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        pytest.fail(f"pip could not fetch {TORCH} and its dependencies for the mirror:\n{r.stderr[-2000:]}")
    wheels = sorted(p.name for p in folder.glob("*.whl"))
    torch_wheels = [w for w in wheels if w.startswith("torch-")]
    assert torch_wheels and "+cpu" in torch_wheels[0], f"expected the +cpu build, got {wheels}"
    return folder


@pytest.fixture()
def mirror(mirror_wheels: Path) -> Iterator[LocalIndex]:
    with LocalIndex(mirror_wheels, variant="cpu", max_requests=5000, lifetime_s=1500) as idx:
        yield idx


def test_torch_from_a_local_pytorch_mirror_installs_imports_and_verifies(
        mirror: LocalIndex, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    r = subprocess.run([sys.executable, "-m", "mlprobe", "install", "--framework", "torch", "--apply",
                        "--venv", str(venv), "--json"], capture_output=True, text=True, timeout=1500,
                       env=_mlprobe_env(mirror.url, tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert doc["applied"] is True and doc["recipe"]["recipe"] == "torch-cpu"
    assert doc["recipe"]["sources"]["index_url"] == mirror.url + "/cpu"
    assert doc["recipe"]["sources"]["origin"] == "recipe"
    # pip took torch from the mirror, not from anywhere else
    assert any(p.startswith("/whl/cpu/torch-2.13.0%2Bcpu") or p.startswith("/whl/cpu/torch-2.13.0+cpu")
               for p in mirror.requests), mirror.requests[:20]
    version = subprocess.run([str(venv / "bin" / "python"), "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True, timeout=300)
    assert version.stdout.strip() == "2.13.0+cpu", version.stderr[-1000:]
    result = doc["result"]
    assert result["import_ok"] is True
    verdicts = [(x["framework"], x["device"], x["verdict"]) for x in result["verify"]["results"]]
    assert ("torch", "cpu", "CPU") in verdicts, verdicts


def test_mirror_down_stops_before_creating_anything(tmp_path: Path) -> None:
    down = free_port_url().rstrip("/").rsplit("/", 1)[0] + "/whl"  # nothing listens there
    venv = tmp_path / "venv"
    r = subprocess.run([sys.executable, "-m", "mlprobe", "install", "--framework", "torch", "--apply",
                        "--venv", str(venv)], capture_output=True, text=True, timeout=300,
                       env=_mlprobe_env(down, tmp_path), cwd=tmp_path)
    assert r.returncode != 0
    assert not venv.exists(), "the venv was created although the index does not answer"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == []
    for option in ("--index-url", "--find-links", "--use-pip-config"):
        assert option in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("bad", ["ftp://mirror.example/whl", "mirror.example/whl", "<pytorch-index>"])
def test_bad_mirror_url_in_the_environment_is_a_usage_error(tmp_path: Path, bad: str) -> None:
    r = subprocess.run([sys.executable, "-m", "mlprobe", "plan", "--framework", "torch"],
                       capture_output=True, text=True, timeout=300, env=_mlprobe_env(bad, tmp_path))
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "MLPROBE_PYTORCH_INDEX_URL" in r.stderr and "E517" in r.stderr and "Traceback" not in r.stderr
