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
from tests.uv_path import UV_DIR

ROOT = Path(__file__).resolve().parent.parent


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
    build_wheel(folder, "intruder", "1.0")  # no recipe asks for it: a leak installs it
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
    cp = subprocess.run([str(venv / "bin" / "python"), "-I", "-c", "import importlib.metadata as m, json;"
                         "print(json.dumps({d.metadata['Name'].lower(): d.version for d in m.distributions()}))"],
                        capture_output=True, text=True, timeout=60)
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


# ---------------------------------------------------------------- credentials (item 5) -------

SECRET = "s3cr3t-Pa55"


@pytest.fixture()
def auth_index(wheels: Path) -> Iterator[LocalIndex]:
    with LocalIndex(wheels, IndexConfig(basic_auth=("alice", SECRET)), max_requests=3000, lifetime_s=240) as idx:
        yield idx


def _with_auth(url: str, password: str = SECRET) -> str:
    return url.replace("http://", f"http://alice:{password}@", 1)


def test_mask_credentials_as_pip_does() -> None:
    from mlprobe.urls import mask_credentials

    assert mask_credentials("http://alice:pw@h:9/simple/") == "http://alice:****@h:9/simple/"
    assert mask_credentials("x https://oauth2accesstoken@h/ y") == "x https://****@h/ y"
    assert mask_credentials("http://u:pass@word@h/") == "http://u:****@h/"
    assert mask_credentials("file:///a@b/c and u:p@h") == "file:///a@b/c and u:p@h"


@pytest.mark.slow
def test_index_credentials_never_reach_the_screen_the_json_or_the_log(work: Path, auth_index: LocalIndex) -> None:
    url = _with_auth(auth_index.url)
    rec = str(recipe_file(work, ["demo-app"]))
    shown = cli(work, "--recipe-file", rec, "--index-url", url, "--venv", str(work / "cwd" / "env"))
    assert shown.returncode == 0, shown.stderr
    as_json = cli(work, "--recipe-file", rec, "--index-url", url, "--json")
    assert as_json.returncode == 0, as_json.stderr
    wrong = cli(work, "--recipe-file", rec, "--index-url", _with_auth(auth_index.url, "wr0ng-" + SECRET))
    assert wrong.returncode != 0
    applied = cli(work, "--recipe-file", rec, "--index-url", url, "--apply", "--no-verify", "--without-pip",
                  "--venv", str(work / "cwd" / "env"), "--json")
    assert applied.returncode == 0, applied.stderr
    assert installed(work / "cwd" / "env").get("demo-app") == "1.0"  # the credentials did reach pip
    logs = list((work / "cache" / "mlprobe" / "logs").glob("install-*.log"))
    assert len(logs) == 1
    for text in (shown.stdout, shown.stderr, as_json.stdout, as_json.stderr, wrong.stdout, wrong.stderr,
                 applied.stdout, applied.stderr, logs[0].read_text()):
        assert SECRET not in text
    assert "alice:****@" in shown.stdout and "alice:****@" in logs[0].read_text()
    doc = json.loads(as_json.stdout)
    assert doc["recipe"]["sources"]["index_url"].startswith("http://alice:****@127.0.0.1")
    assert stat.S_IMODE(logs[0].stat().st_mode) == 0o600
    assert stat.S_IMODE(logs[0].parent.stat().st_mode) == 0o700
    # nor any file the install leaves behind (pylock.toml, the pins, pip.conf, the activate scripts)
    env = work / "cwd" / "env"
    assert (env / "pylock.toml").is_file()
    for f in env.rglob("*"):
        if f.is_file() and not f.is_symlink():
            assert SECRET.encode() not in f.read_bytes(), f


def test_a_malformed_url_with_credentials_is_refused_masked() -> None:
    from mlprobe.urls import BadIndexLocation, check_url

    with pytest.raises(BadIndexLocation) as e:
        check_url(f"http://alice:{SECRET}@127.0.0.1:notaport/simple", "--index-url")
    assert SECRET not in str(e.value) and SECRET not in e.value.url and SECRET not in e.value.why


@pytest.mark.slow
def test_without_a_home_folder_the_log_goes_to_a_private_temp_folder(work: Path, index: LocalIndex,
                                                                     tmp_path: Path) -> None:
    home = tmp_path / "nonexistent"
    # pip runs `rustc --version` for its user agent, and rustup's proxy then makes ~/.rustup: rustup's
    # doing, not mlprobe's, so the Rust tools are left off PATH here.
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if ".cargo" not in p)
    env = cli_env(work, HOME=str(home), TMPDIR=str(tmp_path / "tmp"), PATH=path)
    env.pop("XDG_CACHE_HOME")
    env.pop("PIP_NO_CACHE_DIR")  # pip's cache, too, must not make the home folder
    (tmp_path / "tmp").mkdir()
    cp = cli(work, "--recipe-file", str(recipe_file(work, ["demo-app"])), "--index-url", index.url, "--apply",
             "--no-verify", "--without-pip", "--venv", str(work / "cwd" / "env"), env=env)
    assert cp.returncode == 0, cp.stderr
    assert not home.exists(), "mlprobe created the missing home folder"
    private = tmp_path / "tmp" / f"mlprobe-{os.getuid()}"
    assert stat.S_IMODE(private.stat().st_mode) == 0o700
    assert list((private / "mlprobe" / "logs").glob("install-demo-*.log"))


@pytest.mark.parametrize("home", ["", "/"])
def test_an_empty_or_root_home_is_no_home_folder(tmp_path: Path, home: str) -> None:
    """HOME="" reads as "/" to Python, and some service accounts have "/" as their home: mlprobe's
    logs and journals go to the private temp folder, never to /.cache."""
    code = ("from mlprobe.install.apply import default_log_path; from mlprobe.install.guard import cache_base, "
            "has_home; print(cache_base()); print(default_log_path('x', 'bundle').parent); print(has_home())")
    env = {k: v for k, v in os.environ.items() if k != "XDG_CACHE_HOME"}
    env.update(HOME=home, TMPDIR=str(tmp_path), PYTHONPATH=str(ROOT))
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert cp.returncode == 0, cp.stderr
    base, logs, has = cp.stdout.split()
    assert base == str(tmp_path / f"mlprobe-{os.getuid()}") and has == "False"
    assert logs == str(Path(base) / "mlprobe" / "logs")


def test_bundle_keeps_its_log_out_of_a_missing_home_folder(tmp_path: Path) -> None:
    home = tmp_path / "nonexistent"
    env = {k: v for k, v in os.environ.items() if k != "XDG_CACHE_HOME"}
    env.update(HOME=str(home), TMPDIR=str(tmp_path), PYTHONPATH=str(ROOT))
    code = "from mlprobe.commands.bundle import _log_path; print(_log_path('plaidml-keras'))"
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert cp.returncode == 0, cp.stderr
    log = Path(cp.stdout.strip())
    assert not home.exists(), "mlprobe created the missing home folder"
    assert log.parent == tmp_path / f"mlprobe-{os.getuid()}" / "mlprobe" / "logs"
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700


# ---------------------------------------------------------------- source isolation (item 4) --

@pytest.fixture()
def extra_index(extra_wheels: Path) -> Iterator[LocalIndex]:
    with LocalIndex(extra_wheels, IndexConfig(), max_requests=3000, lifetime_s=240) as idx:
        yield idx


def _leak(case: str, work: Path, extra: LocalIndex) -> Dict[str, str]:
    """The environment (and files) of one way to slip another source or package in."""
    cwd, conf = work / "cwd", work / "conf"
    conf.mkdir(exist_ok=True)
    uv_toml = f'[pip]\nextra-index-url = ["{extra.url}"]\n'
    env: Dict[str, str] = {}
    if case == "uv.toml in the working folder":
        (cwd / "uv.toml").write_text(uv_toml)
    elif case == "[tool.uv] of a pyproject.toml above":
        (work / "pyproject.toml").write_text(f'[project]\nname = "x"\nversion = "0"\n'
                                             f'[tool.uv.pip]\nextra-index-url = ["{extra.url}"]\n')
    elif case == "UV_CONFIG_FILE":
        (conf / "uv.toml").write_text(uv_toml)
        env["UV_CONFIG_FILE"] = str(conf / "uv.toml")
    elif case == "~/.config/uv":
        (conf / "uv").mkdir()
        (conf / "uv" / "uv.toml").write_text(uv_toml)
        env["XDG_CONFIG_HOME"] = str(conf)
    elif case == "UV_OVERRIDE":
        (conf / "over.txt").write_text("goodlib==1.0\nintruder\n")
        env["UV_OVERRIDE"] = str(conf / "over.txt")
    elif case == "UV_CONSTRAINT":
        (conf / "c.txt").write_text("goodlib==1.0\n")
        env["UV_CONSTRAINT"] = str(conf / "c.txt")
    elif case == "PIP_CONSTRAINT with an index line":
        (conf / "c.txt").write_text(f"# pins\n--extra-index-url {extra.url}\ngoodlib<10\n")
        env["PIP_CONSTRAINT"] = str(conf / "c.txt")
    elif case == "PIP_CONSTRAINT including a file with a find-links line":
        (conf / "inner.txt").write_text(f"--find-links {extra.folder}\n")
        (conf / "c.txt").write_text("-c inner.txt\ngoodlib<10\n")
        env["PIP_CONSTRAINT"] = str(conf / "c.txt")
    elif case == "PIP_CONSTRAINT at a URL with an index line":
        (extra.folder / "c.txt").write_text(f"--extra-index-url {extra.url}\ngoodlib<10\n")
        env["PIP_CONSTRAINT"] = extra.url.replace("/simple/", "/files/c.txt")
    elif case == "PIP_CONFIG_FILE naming a constraints file with an index line":
        (conf / "c.txt").write_text(f"--extra-index-url {extra.url}\ngoodlib<10\n")
        (conf / "pip.conf").write_text(f"[install]\nconstraint = {conf / 'c.txt'}\n")
        env["PIP_CONFIG_FILE"] = str(conf / "pip.conf")
    elif case == "PIP_REQUIREMENT":
        (conf / "r.txt").write_text("intruder\n")
        env["PIP_REQUIREMENT"] = str(conf / "r.txt")
    else:
        raise AssertionError(case)
    return env


UV_CASES = ["uv.toml in the working folder", "[tool.uv] of a pyproject.toml above", "UV_CONFIG_FILE",
            "~/.config/uv", "UV_OVERRIDE", "UV_CONSTRAINT"]
PIP_CASES = ["PIP_CONSTRAINT with an index line", "PIP_CONSTRAINT including a file with a find-links line",
             "PIP_CONSTRAINT at a URL with an index line",
             "PIP_CONFIG_FILE naming a constraints file with an index line", "PIP_REQUIREMENT"]


@pytest.mark.slow
@pytest.mark.parametrize("installer,case", [("uv", c) for c in UV_CASES] + [("pip", c) for c in PIP_CASES]
                         + [("uv", "PIP_REQUIREMENT")])
def test_configuration_cannot_add_a_source_or_a_package(work: Path, index: LocalIndex, extra_index: LocalIndex,
                                                        installer: str, case: str) -> None:
    if installer == "uv" and UV_DIR is None:
        pytest.skip("no uv")
    path = os.pathsep.join(([UV_DIR] if UV_DIR else []) + [os.environ.get("PATH", "")])
    env = cli_env(work, PATH=path, **_leak(case, work, extra_index))
    venv = work / "cwd" / "env"
    cp = cli(work, "--recipe-file", str(recipe_file(work, ["demo-app"])), "--index-url", index.url, "--apply",
             "--no-verify", "--without-pip", "--installer", installer, "--venv", str(venv), env=env)
    assert cp.returncode == 0, cp.stderr[-3000:]
    got = installed(venv)
    assert got.get("demo-app") == "1.0" and got.get("goodlib") == "2.0" and "intruder" not in got, (case, got)
    assert not [r for r in extra_index.requests if "/simple/" in r], "the other index was asked"
    assert "set aside for this install" in cp.stdout, cp.stdout


@pytest.mark.slow
def test_a_constraints_file_keeps_its_constraints_without_its_options(work: Path, index: LocalIndex,
                                                                      extra_index: LocalIndex) -> None:
    conf = work / "conf"
    conf.mkdir()
    (conf / "c.txt").write_text(f"--extra-index-url {extra_index.url}\ngoodlib<2\n")
    env = cli_env(work, PIP_CONSTRAINT=str(conf / "c.txt"))
    cp = cli(work, "--recipe-file", str(recipe_file(work, ["goodlib"])), "--index-url", index.url, "--apply",
             "--no-verify", "--without-pip", "--installer", "pip", "--venv", str(work / "cwd" / "env"), env=env)
    assert cp.returncode == 0, cp.stderr[-3000:]
    assert installed(work / "cwd" / "env").get("goodlib") == "1.0"  # the constraint still applies
    assert f"--extra-index-url {extra_index.url}" in cp.stdout.replace("\n", " ").replace("  ", " ")


def test_pip_env_clears_the_options_that_add_packages_or_move_them() -> None:
    from mlprobe.install.backends import Sources, pip_env, uv_env

    old = dict(os.environ)
    try:
        os.environ.update({"PIP_EDITABLE": "/src/x", "PIP_REQUIREMENT": "/r.txt", "PIP_TARGET": "/elsewhere",
                           "PIP_PREFIX": "/p", "UV_INDEX_MIRROR_USERNAME": "u", "UV_TORCH_BACKEND": "auto"})
        for s in (Sources(index_url="http://127.0.0.1:9/simple"), Sources(use_pip_config=True)):
            env = pip_env(s)
            assert env["PIP_EDITABLE"].split() == [] and env["PIP_REQUIREMENT"].split() == []
            assert "PIP_TARGET" not in env and "PIP_PREFIX" not in env
        uv = uv_env(Sources(index_url="http://127.0.0.1:9/simple"))
        assert uv["UV_NO_CONFIG"] == "1" and "UV_TORCH_BACKEND" not in uv and "UV_INDEX_MIRROR_USERNAME" not in uv
    finally:
        os.environ.clear()
        os.environ.update(old)


# ---------------------------------------------------------------- journals (items 1 and 16) ---

SLOW = "big_lib-1.0-py3-none-any.whl"


@pytest.fixture()
def slow_index(wheels: Path) -> Iterator[LocalIndex]:
    cfg = IndexConfig(slow_files={SLOW}, slow_chunk=16 * 1024, slow_tick_s=0.05, slow_from_nth=2)
    with LocalIndex(wheels, cfg, max_requests=800, lifetime_s=240) as idx:
        yield idx


def _killed_midway(work: Path, idx: LocalIndex, venv: Path, *extra: str) -> None:
    """`install --apply` into venv, killed (-9, the whole group) while pip downloads."""
    import signal
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "mlprobe", "install", "--recipe-file", str(recipe_file(work, ["big-app"])),
         "--index-url", idx.url, "--apply", "--no-verify", "--installer", "pip", "--venv", str(venv), *extra],
        cwd=work / "cwd", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(work),
        start_new_session=True)
    try:
        if not idx.slow_started.wait(120):
            proc.kill()
            pytest.fail(f"the slow download never started: {proc.communicate()[1][-2000:]}")
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    idx.config.slow_files.clear()
    idx.slow_started.clear()
    time.sleep(0.5)  # the supervisor's SIGKILL of pip's group lands


def _venv_with(path: Path, index: LocalIndex, *packages: str) -> Path:
    from tests.pep503_server import make_venv, pip_install

    py = make_venv(path)
    if packages:
        pip_install(py, index.url, *packages)
    return py


@pytest.mark.slow
def test_a_venv_re_created_after_a_killed_run_is_not_removed(work: Path, slow_index: LocalIndex) -> None:
    venv = work / "cwd" / "env"
    _killed_midway(work, slow_index, venv, "--without-pip")
    assert (venv / "pyvenv.cfg").is_file()
    shutil.rmtree(venv)  # the person starts over by hand and puts work in it
    _venv_with(venv, slow_index)
    (venv / "notebook.ipynb").write_text("my work")
    for args in (("--recover",), ("--recipe-file", str(recipe_file(work, ["demo-app"])), "--index-url",
                                  slow_index.url, "--apply", "--no-verify", "--venv", str(venv))):
        cp = cli(work, *args)
        assert cp.returncode == 1, cp.stderr
        assert "[E511]" in cp.stderr and "changed since" in cp.stderr and "removed" not in cp.stderr, cp.stderr
        assert (venv / "notebook.ipynb").read_text() == "my work" and (venv / "pyvenv.cfg").is_file()


@pytest.mark.slow
def test_files_and_packages_added_after_a_killed_run_are_kept_and_named(work: Path, slow_index: LocalIndex) -> None:
    """Right after the kill (no waiting: the timing does not matter), the person saves work into the
    venv and installs a package of their own: recover removes only what the install recorded."""
    from tests.pep503_server import pip_install

    venv = work / "cwd" / "env"
    py = _venv_with(venv, slow_index, "goodlib==1.0")
    _killed_midway(work, slow_index, venv)
    (venv / "mywork").mkdir()
    (venv / "mywork" / "results.csv").write_text("1,2,3")
    pip_install(py, slow_index.url, "intruder")  # a package the person wanted
    cp = cli(work, "--recover")
    assert cp.returncode == 0, cp.stderr
    assert "rolled back an interrupted install" in cp.stderr
    assert str(venv / "mywork" / "results.csv") in cp.stderr and "did not record" in cp.stderr, cp.stderr
    assert "intruder" in cp.stderr  # named as a package it did not install
    assert (venv / "mywork" / "results.csv").read_text() == "1,2,3"
    assert "intruder" in installed(venv) and installed(venv)["goodlib"] == "1.0"


@pytest.mark.slow
@pytest.mark.parametrize("existing", [False, True], ids=["half-made new venv", "existing venv"])
def test_a_folder_moved_in_after_a_killed_run_is_kept(work: Path, slow_index: LocalIndex, existing: bool) -> None:
    """`mv ~/mywork venv/` keeps the files' old times: no time tells them apart from the install's,
    and none is needed; nothing names them as the install's, so they stay, and recover says so."""
    import time

    venv = work / "cwd" / "env"
    if existing:
        _venv_with(venv, slow_index, "goodlib==1.0")
    mywork = work / "mywork"
    mywork.mkdir()
    (mywork / "thesis.tex").write_text("years of work")
    old = time.time() - 86400
    os.utime(mywork / "thesis.tex", (old, old))
    _killed_midway(work, slow_index, venv, *([] if existing else ["--without-pip"]))
    assert (venv / "pyvenv.cfg").is_file()
    shutil.move(str(mywork), str(venv / "mywork"))
    cp = cli(work, "--recover")
    assert cp.returncode == 0, cp.stderr
    assert str(venv / "mywork" / "thesis.tex") in cp.stderr, cp.stderr
    assert (venv / "mywork" / "thesis.tex").read_text() == "years of work"
    if existing:
        assert installed(venv) == {"goodlib": "1.0"}
    else:
        assert sorted(p.name for p in venv.iterdir()) == ["mywork"]


@pytest.mark.slow
def test_a_killed_run_through_a_symlink_never_rolls_back_what_the_link_points_to_now(
        work: Path, slow_index: LocalIndex) -> None:
    from tests.pep503_server import tree_state

    a, b, link = work / "cwd" / "a", work / "cwd" / "b", work / "cwd" / "link"
    _venv_with(a, slow_index, "goodlib==1.0")
    _venv_with(b, slow_index, "goodlib==1.0")
    (b / "precious.txt").write_text("keep me")
    link.symlink_to(a)
    _killed_midway(work, slow_index, link)
    b_before = tree_state(b)
    link.unlink()
    link.symlink_to(b)  # the link now leads to the other venv
    cp = cli(work, "--recipe-file", str(recipe_file(work, ["demo-app"])), "--index-url", slow_index.url,
             "--apply", "--no-verify", "--venv", str(a))
    assert cp.returncode == 0, cp.stderr
    assert "rolled back an interrupted install" in cp.stderr
    assert tree_state(b) == b_before, "the venv the link points to now was changed"
    assert "demo-app" in installed(a) and (b / "precious.txt").is_file()


def _journal_file(work: Path, venv: Path) -> Path:
    from mlprobe.install.guard import journal_path

    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(work / "cache")
    try:
        path = journal_path(str(venv))
    finally:
        if old is None:
            os.environ.pop("XDG_CACHE_HOME")
        else:
            os.environ["XDG_CACHE_HOME"] = old
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _bad_journals(venv: Path) -> Dict[str, str]:
    from mlprobe.install.guard import JOURNAL_VERSION

    good = {"journal_version": JOURNAL_VERSION, "target": str(venv), "pid": 1, "token": "t", "new_venv": None,
            "env_python": str(venv / "bin" / "python"), "roots": [str(venv)], "shallow": [], "backups": {},
            "backup_dir": None, "identity": {}, "marked": False, "marker_root": None,
            "before": {"dists": {}, "files": {}, "dirs": []}}
    text = json.dumps(good)
    return {
        "truncated": text[: len(text) // 2],
        "empty": "",
        "a list": "[]",
        "roots a number": json.dumps(dict(good, roots=5)),
        "new_venv a number": json.dumps(dict(good, new_venv=5)),
        "a file state of strings": json.dumps(dict(good, before={"files": {"/x": ["big", "old"]}})),
        "dists of numbers": json.dumps(dict(good, before={"dists": {"six": 1}})),
        "backups a list": json.dumps(dict(good, backups=["x"])),
        "target a number": json.dumps(dict(good, target=7)),
    }


@pytest.mark.parametrize("case", list(_bad_journals(Path("/x"))))
def test_recover_and_apply_agree_on_a_bad_journal(work: Path, index: LocalIndex, case: str) -> None:
    venv = work / "cwd" / "env"
    _venv_with(venv, index)
    _journal_file(work, venv).write_text(_bad_journals(venv)[case])
    rec = cli(work, "--recover")
    app = cli(work, "--recipe-file", str(recipe_file(work, ["demo-app"])), "--index-url", index.url, "--apply",
              "--no-verify", "--venv", str(venv))
    for cp in (rec, app):
        assert cp.returncode == 1, (case, cp.returncode, cp.stderr)
        assert "[E511]" in cp.stderr and "cannot read" in cp.stderr and "Traceback" not in cp.stderr, cp.stderr
        assert str(_journal_file(work, venv)) in cp.stderr
    assert "demo-app" not in installed(venv)


def test_a_dangling_symlink_as_venv_is_refused_plainly(work: Path, index: LocalIndex) -> None:
    link = work / "cwd" / "env"
    link.symlink_to(work / "nowhere" / "env")
    cp = cli(work, "--recipe-file", str(recipe_file(work, ["demo-app"])), "--index-url", index.url, "--apply",
             "--no-verify", "--venv", str(link))
    assert cp.returncode == 2 and "[E509]" in cp.stderr and "symbolic link" in cp.stderr, cp.stderr
    assert "removed the half-made" not in cp.stderr and "apt" not in cp.stderr
    assert link.is_symlink() and not (work / "nowhere").exists()
    # two links that point at each other: said as a loop, with a next step that fits it
    a, b = work / "cwd" / "loop-a", work / "cwd" / "loop-b"
    a.symlink_to(b)
    b.symlink_to(a)
    cp = cli(work, "--recipe-file", str(recipe_file(work, ["demo-app"])), "--index-url", index.url, "--apply",
             "--no-verify", "--venv", str(a))
    assert cp.returncode == 2 and "[E509]" in cp.stderr and "a loop of links" in cp.stderr, cp.stderr
    assert "does not exist" not in cp.stderr and "mkdir" not in cp.stderr
    assert a.is_symlink() and b.is_symlink()


@pytest.mark.slow
def test_a_link_to_an_empty_folder_is_emptied_again_not_removed(work: Path, index: LocalIndex) -> None:
    real = work / "real-env"
    real.mkdir()
    link = work / "cwd" / "env"
    link.symlink_to(real)
    bad = build_wheel(index.folder, "bad-import", "1.0",
                      modules={"bad_import/__init__.py": "raise ImportError('planted')\n"})
    try:
        cp = cli(work, "--recipe-file", str(recipe_file(work, ["bad-import"], imports=["bad_import"])),
                 "--index-url", index.url, "--apply", "--no-verify", "--without-pip", "--venv", str(link))
    finally:
        bad.unlink()
    assert cp.returncode == 1 and "[E516]" in cp.stderr, cp.stderr
    assert "removed the half-made environment" not in cp.stderr and "apt" not in cp.stderr
    assert "the folder stays, empty" in cp.stderr
    assert link.is_symlink() and real.is_dir() and list(real.iterdir()) == []


# ---------------------------------------------------------------- capture (items 2 and 21) ----

_NO_ROOM = ("import resource, runpy, signal, sys\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"  # a write past the limit fails (EFBIG)
            "resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))\n"  # like a full disk: no byte fits
            "sys.argv = ['mlprobe'] + sys.argv[1:]\n"
            "runpy.run_module('mlprobe', run_name='__main__')\n")


@pytest.mark.slow
def test_capture_that_cannot_write_leaves_nothing_and_the_retry_works(tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    full = subprocess.run([sys.executable, "-c", _NO_ROOM, "capture", str(out)], capture_output=True, text=True,
                          timeout=300, env=env, cwd=tmp_path)
    assert not out.exists(), "the folder the failed capture made is left behind"
    assert full.returncode == 1, full.stderr
    assert "nothing was left behind" in full.stderr
    assert "[E104]" in full.stderr and "Traceback" not in full.stderr, full.stderr
    assert [p.name for p in tmp_path.iterdir() if p.name != "bundle"] == []  # no staging folder left
    again = subprocess.run([sys.executable, "-m", "mlprobe", "capture", str(out)], capture_output=True, text=True,
                           timeout=300, env=env, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert (out / "host.json").stat().st_size > 0
    assert "NOT redacted" in again.stderr and "mlprobe report --replay" in again.stderr
    assert "NOT redacted" in (out / "NOTICE-unredacted.txt").read_text()
    quiet = subprocess.run([sys.executable, "-m", "mlprobe", "--quiet", "capture", str(tmp_path / "b2")],
                           capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert quiet.returncode == 0 and "NOT redacted" in quiet.stderr, quiet.stderr
    replay = subprocess.run([sys.executable, "-m", "mlprobe", "scan", "--replay", str(out), "--json"],
                            capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert replay.returncode == 0, replay.stderr
    # a folder of the person's, empty before: it stays, empty, and the message says so
    mine = tmp_path / "mine"
    mine.mkdir()
    full = subprocess.run([sys.executable, "-c", _NO_ROOM, "capture", str(mine)], capture_output=True, text=True,
                          timeout=300, env=env, cwd=tmp_path)
    assert full.returncode == 1 and mine.is_dir() and not any(mine.iterdir())
    assert "is as it was, empty" in full.stderr, full.stderr


@pytest.mark.slow
def test_a_mirror_password_in_the_environment_is_masked_in_plan_and_install(tmp_path: Path) -> None:
    """MLPROBE_PYTORCH_INDEX_URL with a password: plan (text and JSON) and install's dry run show the
    mirror as pip shows it, `user:****@`."""
    env = dict(os.environ, MLPROBE_PYTORCH_INDEX_URL=f"https://bob:{SECRET}@mirror.example/whl",
               XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    bundle = str(ROOT / "fixtures" / "linux-nvidia-h200-mlprobe-capture")
    for argv in (["plan", "--framework", "torch"], ["plan", "--framework", "torch", "--json"],
                 ["install", "--framework", "torch"], ["install", "--framework", "torch", "--json"]):
        cp = subprocess.run([sys.executable, "-m", "mlprobe", *argv, "--replay", bundle], capture_output=True,
                            text=True, timeout=120, env=env, cwd=tmp_path)
        assert cp.returncode in (0, 3), cp.stderr  # 3: install's JSON run found the mirror unreachable
        assert SECRET not in cp.stdout + cp.stderr, argv
        assert "bob:****@mirror.example" in cp.stdout + cp.stderr, argv
