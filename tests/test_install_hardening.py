"""What a hostile user did to `mlprobe install` in the second hardening round, and what holds now:
recipe files that smuggle pip options or Python code, index URLs with a query or with credentials,
configuration of pip and uv that adds sources or packages behind the recipe's back, journals that
are truncated, of the wrong types, or point at a target that changed since. Real pip, real uv, real
venvs and indexes on 127.0.0.1."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator

import pytest

from mlprobe.errors import StageError, exit_status
from mlprobe.install.steps import InstallOptions, build_plan
from mlprobe.model.plan import Recommendation
from tests.pep503_server import IndexConfig, LocalIndex, build_wheel

ROOT = Path(__file__).resolve().parent.parent
UV_DIR = "/work/venv/bin"


def _rec(**extra: object) -> Recommendation:
    doc: Dict[str, object] = {"recipe": "demo", "title": "a demo recipe", "framework": "demo",
                              "packages": ["goodlib"]}
    doc.update(extra)
    return Recommendation.from_json(doc)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheels")
    build_wheel(folder, "goodlib", "1.0")
    build_wheel(folder, "goodlib", "2.0")
    build_wheel(folder, "demo-app", "1.0", requires=["goodlib>=2"])
    build_wheel(folder, "big-lib", "1.0", padding_bytes=3 * 1024 * 1024)
    build_wheel(folder, "big-app", "1.0", requires=["goodlib>=2", "big-lib"])
    return folder


@pytest.fixture(scope="module")
def extra_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another source: a newer goodlib and a package no recipe asks for."""
    folder = tmp_path_factory.mktemp("extra-wheels")
    build_wheel(folder, "goodlib", "9.0")
    build_wheel(folder, "intruder", "1.0")
    return folder


@pytest.fixture()
def index(wheels: Path) -> Iterator[LocalIndex]:
    with LocalIndex(wheels, IndexConfig(), max_requests=3000, lifetime_s=240) as idx:
        yield idx


@pytest.fixture()
def work(tmp_path: Path) -> Path:
    (tmp_path / "cache").mkdir()
    (tmp_path / "cwd").mkdir()
    return tmp_path


def cli_env(work: Path, **extra: str) -> Dict[str, str]:
    env = dict(os.environ)
    env["XDG_CACHE_HOME"] = str(work / "cache")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PIP_NO_CACHE_DIR"] = "1"
    env["UV_CACHE_DIR"] = str(work / "uv-cache")
    env.update(extra)
    return env


def cli(work: Path, *args: str, env: "Dict[str, str] | None" = None,
        timeout: float = 300) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([sys.executable, "-m", "mlprobe", "install", *args], cwd=work / "cwd",
                          capture_output=True, text=True, timeout=timeout, env=env or cli_env(work))


def recipe_file(work: Path, packages: "list[str]", **extra: object) -> Path:
    doc: Dict[str, object] = {"recipe": "demo", "title": "a demo recipe", "framework": "demo",
                              "packages": packages}
    doc.update(extra)
    path = work / f"recipe-{abs(hash((tuple(packages), json.dumps(extra, sort_keys=True)))) % 10**8}.json"
    path.write_text(json.dumps(doc))
    return path


def installed(venv: Path) -> Dict[str, str]:
    cp = subprocess.run([sys.executable, "-c", "import importlib.metadata as m, json, sys;"
                         "print(json.dumps({d.metadata['Name'].lower(): d.version for d in m.distributions()}))"],
                        capture_output=True, text=True, timeout=60,
                        env={"PYTHONPATH": "", "PATH": os.environ.get("PATH", "")},
                        executable=str(venv / "bin" / "python"))
    return dict(json.loads(cp.stdout))


# ---------------------------------------------------------------- recipe files (item 6) ------

@pytest.mark.parametrize("package", [
    "--index-url=http://127.0.0.1:9/simple/", "-i http://127.0.0.1:9/simple/", "--pre", "-e .",
    "-r /etc/passwd", "goodlib --extra-index-url http://127.0.0.1:9/", "goodlib; os_name == ", "good lib",
    "goodlib\n--no-deps",
])
def test_a_recipe_package_that_is_no_requirement_is_refused(package: str) -> None:
    with pytest.raises(StageError) as e:
        build_plan(_rec(packages=["six", package]), InstallOptions(use_pip_config=True))
    assert e.value.ref == "E513" and exit_status(e.value.kind) == 2
    assert "requirement" in e.value.what


@pytest.mark.parametrize("imp", ["os;os.system('touch PWNED')#", "os as x", "__import__('os')", "a..b", "1abc",
                                 "import", "os.", "", "a.b-c", "x\ny"])
def test_a_recipe_import_that_is_no_dotted_name_is_refused(imp: str) -> None:
    with pytest.raises(StageError) as e:
        build_plan(_rec(imports=[imp]), InstallOptions(use_pip_config=True))
    assert e.value.ref == "E513" and exit_status(e.value.kind) == 2
    assert "import" in e.value.what


def test_good_requirements_and_imports_pass() -> None:
    plan = build_plan(_rec(packages=["six==1.17.0", "torch[extra]>=2; python_version >= '3.9'", "a.b_c"],
                           imports=["six", "torch.nn", "_private.mod"]),
                      InstallOptions(use_pip_config=True))
    assert plan.packages[0] == "six==1.17.0" and plan.imports == ["six", "torch.nn", "_private.mod"]


def test_a_hostile_recipe_file_is_refused_before_pip_or_python_runs(work: Path, index: LocalIndex) -> None:
    venv = work / "cwd" / "env"
    planted = work / "PWNED"
    for rec in (recipe_file(work, ["demo-app", f"--extra-index-url={index.url}"]),
                recipe_file(work, ["demo-app"], imports=[f"os;open({str(planted)!r},'w')#"])):
        before = len(index.requests)
        cp = cli(work, "--recipe-file", str(rec), "--index-url", index.url, "--apply", "--no-verify",
                 "--venv", str(venv))
        assert cp.returncode == 2, cp.stderr
        assert "[E513]" in cp.stderr and "Traceback" not in cp.stderr
        assert len(index.requests) == before, "the index was asked before the recipe was checked"
        assert not venv.exists() and not planted.exists()


# ---------------------------------------------------------------- mirror URLs (item 20) -------

@pytest.mark.parametrize("base,suffix,joined", [
    ("http://127.0.0.1:9/whl", "cpu", "http://127.0.0.1:9/whl/cpu"),
    ("http://127.0.0.1:9/whl/", "cpu", "http://127.0.0.1:9/whl/cpu"),
    ("http://127.0.0.1:9/whl?token=abc&x=1", "cpu", "http://127.0.0.1:9/whl/cpu?token=abc&x=1"),
    ("http://127.0.0.1:9/whl/?token=a/b#frag", "cu130", "http://127.0.0.1:9/whl/cu130?token=a/b#frag"),
    ("http://127.0.0.1:9", "cpu", "http://127.0.0.1:9/cpu"),
    ("http://u:p@127.0.0.1:9/w%20x?q=1", "rocm6.2", "http://u:p@127.0.0.1:9/w%20x/rocm6.2?q=1"),
])
def test_a_suffix_joins_the_path_of_a_url_not_its_query(base: str, suffix: str, joined: str) -> None:
    from mlprobe.urls import join_path

    assert join_path(base, suffix) == joined


def test_a_mirror_with_a_query_keeps_it_in_the_plan_and_in_the_index_check() -> None:
    from mlprobe.install.index import _project_url
    from mlprobe.install.steps import _label_of
    from mlprobe.plan.planner import make_plan
    from tests.test_plan import FIXTURES, _report

    env = {"MLPROBE_PYTORCH_INDEX_URL": "http://127.0.0.1:8080/whl?token=abc&x=1"}
    plan = make_plan(_report(FIXTURES / "linux-nvidia-h200-mlprobe-capture"), framework="torch", env=env)
    top = plan["recommended"][0]
    assert top["index_url"] == f"http://127.0.0.1:8080/whl/{top['index']}?token=abc&x=1"
    assert _label_of(top["index"], top["index_url"]) == top["index"]
    assert _label_of(None, top["index_url"]) == top["index"]
    assert _project_url(top["index_url"], "torch") == f"http://127.0.0.1:8080/whl/{top['index']}/torch/?token=abc&x=1"
