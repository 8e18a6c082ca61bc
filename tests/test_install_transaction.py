"""`mlprobe install --apply` against a real index on 127.0.0.1, real venvs and real pip: every
failure leaves an existing environment as it was (same `pip freeze`, same files) and removes a
half-made new venv; the error names what failed and what to try next."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest

from mlprobe.model.plan import Recommendation

from tests.pep503_server import (
    IndexConfig,
    LocalIndex,
    free_port_url,
    make_venv,
    pip_freeze,
    pip_install,
    sample_wheels,
    tree_state,
)
from tests.uv_path import UV_DIR

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheels")
    sample_wheels(folder)
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


def recipe(work: Path, packages: List[str], **extra: object) -> Path:
    rec = {"recipe": "demo", "title": "a demo recipe", "framework": "demo", "packages": packages}
    rec.update(extra)
    path = work / f"recipe-{abs(hash(tuple(packages))) % 10**8}.json"
    path.write_text(json.dumps(rec))
    return path


def cli_env(work: Path, uv_on_path: bool = False) -> Dict[str, str]:
    env = dict(os.environ)
    if uv_on_path and UV_DIR:
        env["PATH"] = os.pathsep.join([UV_DIR, env.get("PATH", "")])
    env["XDG_CACHE_HOME"] = str(work / "cache")
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def cli(work: Path, *args: str, timeout: float = 300, uv_on_path: bool = False) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([sys.executable, "-m", "mlprobe", "install", *args], cwd=work / "cwd",
                          capture_output=True, text=True, timeout=timeout, env=cli_env(work, uv_on_path))


_TEMPLATES: Dict[Tuple[str, ...], Path] = {}


def existing_env(work: Path, index: LocalIndex, *packages: str) -> Tuple[Path, Path, str, Dict[str, str]]:
    """A venv with these packages (copied from one built once per package set: pip runs once)."""
    key = tuple(packages)
    if key not in _TEMPLATES or not _TEMPLATES[key].exists():
        import tempfile

        template = Path(tempfile.mkdtemp(prefix="mlprobe-test-env-")) / "env"
        py = make_venv(template)
        if packages:
            pip_install(py, index.url, *packages)
        _TEMPLATES[key] = template
    venv = work / "env"
    shutil.copytree(_TEMPLATES[key], venv, symlinks=True)
    py = venv / "bin" / "python"
    return venv, py, pip_freeze(py), tree_state(venv)


@pytest.fixture(scope="module", autouse=True)
def _drop_templates() -> Iterator[None]:
    yield
    for t in _TEMPLATES.values():
        shutil.rmtree(t.parent, ignore_errors=True)
    _TEMPLATES.clear()


def assert_unchanged(venv: Path, py: Path, freeze: str, tree: Dict[str, str]) -> None:
    assert pip_freeze(py) == freeze
    after = tree_state(venv)
    # uv's own lock file: every `uv pip` command in a venv makes an empty <venv>/.lock, the dry run
    # the pre-flight shows included (before the install's transaction starts)
    if ".lock" in after and ".lock" not in tree and (venv / ".lock").stat().st_size == 0:
        del after[".lock"]
    assert sorted(set(after) ^ set(tree)) == []
    assert {k for k in tree if tree[k] != after[k]} == set()


def drop_half_extracted(venv: Path, tree: Dict[str, str], stderr: str) -> None:
    """brokenlib's payload fails its CRC while pip extracts it: the file pip had begun has no RECORD
    (pip writes it last), so nothing names it as the install's and the rollback keeps it, naming it.
    The test checks that and then deletes it by hand, as the person would."""
    flat = stderr.replace("\n", "")
    half = sorted((k for k in set(tree_state(venv)) - set(tree)), key=len, reverse=True)
    assert all("brokenlib" in k for k in half), half
    for k in half:
        if (venv / k).is_file():
            assert "did not record" in flat and str(venv / k) in flat, stderr
            (venv / k).unlink()
        else:
            (venv / k).rmdir()


# ---------------------------------------------------------------- success first --------------

def test_apply_into_existing_venv_upgrades_and_writes_env(work: Path, index: LocalIndex) -> None:
    venv, py, freeze, _ = existing_env(work, index, "goodlib==1.0")
    assert "goodlib==1.0" in freeze
    rec = recipe(work, ["demo-app"], env={"HSA_OVERRIDE_GFX_VERSION": "10.3.0"}, imports=["demo_app"])
    cp = cli(work, "--recipe-file", str(rec), "--index-url", index.url, "--apply", "--venv", str(venv))
    assert cp.returncode == 0, cp.stderr
    after = pip_freeze(py)
    assert "goodlib==2.0" in after and "demo-app==1.0" in after
    assert "HSA_OVERRIDE_GFX_VERSION='10.3.0'" in (venv / "bin" / "activate").read_text()
    assert "HSA_OVERRIDE_GFX_VERSION" in (venv / "bin" / "activate.fish").read_text()
    out = subprocess.run(["bash", "-c", f". {venv}/bin/activate && echo $HSA_OVERRIDE_GFX_VERSION && deactivate "
                          "&& echo ${HSA_OVERRIDE_GFX_VERSION-unset}"], capture_output=True, text=True, timeout=30)
    assert out.stdout.split() == ["10.3.0", "unset"]
    # and without activate (an IDE, cron): the start-up hook sets it
    plain = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", str(py), "-c",
                            "import os; print(os.environ.get('HSA_OVERRIDE_GFX_VERSION'))"],
                           capture_output=True, text=True, timeout=30)
    assert plain.stdout.strip() == "10.3.0", plain.stderr
    logs = list((work / "cache" / "mlprobe" / "logs").glob("install-demo-*.log"))
    # The installer's own output is in the log: pip's or uv's, whichever installed.
    text = logs[0].read_text()
    assert len(logs) == 1 and re.search(r"Successfully installed|Installed 2 packages", text), text
    assert str(logs[0]) in cp.stdout
    # Nothing was written outside the venv and the log folder (no rc file, nothing in the cwd).
    assert list((work / "cwd").iterdir()) == []


def test_apply_new_venv_default_path_and_json(work: Path, index: LocalIndex) -> None:
    rec = recipe(work, ["demo-app"])
    cp = cli(work, "--recipe-file", str(rec), "--index-url", index.url, "--apply", "--without-pip", "--json")
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(cp.stdout)
    venv = work / "cwd" / "mlprobe-demo-venv"
    assert doc["applied"] is True and doc["result"]["path"] == str(venv)
    assert "demo-app==1.0" in pip_freeze(venv / "bin" / "python")
    assert {d["name"] for d in doc["resolution"]["distributions"]} == {"demo-app", "goodlib"}


# ---------------------------------------------------------------- failures, existing env -----

def test_broken_wheel_midway_restores_upgraded_package(work: Path, index: LocalIndex) -> None:
    """pip installs goodlib 2.0 over 1.0, then fails on brokenlib's damaged payload: the 1.0 files
    come back. The half-extracted brokenlib has no RECORD yet, so nothing names its file as the
    install's: it is kept, and the result names it (a rollback deletes only what was recorded)."""
    venv, py, freeze, tree = existing_env(work, index, "goodlib==1.0")
    cp = cli(work, "--recipe-file", str(recipe(work, ["broken-app"])), "--index-url", index.url,
             "--apply", "--venv", str(venv))
    assert cp.returncode == 1
    assert "[E505]" in cp.stderr and "damaged" in cp.stderr
    assert "environment restored" in cp.stderr and "next:" in cp.stderr
    drop_half_extracted(venv, tree, cp.stderr)
    assert_unchanged(venv, py, freeze, tree)
    v = subprocess.run([str(py), "-c", "import goodlib; print(goodlib.__version__)"], capture_output=True,
                       text=True, timeout=60)
    assert v.stdout.strip() == "1.0"


def test_404_is_caught_before_anything_changes(work: Path, index: LocalIndex) -> None:
    index.config.missing_files = {"gone_lib-1.0-py3-none-any.whl"}  # listed (with metadata), not served
    venv, py, freeze, tree = existing_env(work, index, "goodlib==1.0")
    cp = cli(work, "--recipe-file", str(recipe(work, ["gone-app"])), "--index-url", index.url,
             "--apply", "--venv", str(venv))
    assert cp.returncode in (1, 3), cp.stdout
    assert "[E502]" in cp.stderr and "404" in cp.stderr
    assert_unchanged(venv, py, freeze, tree)


def test_404_at_install_time_rolls_back(work: Path, index: LocalIndex) -> None:
    """The file disappears between the pre-flight and the install: pip fails on the download."""
    from mlprobe.errors import StageError
    from mlprobe.install.apply import apply, prepare
    from mlprobe.install.steps import InstallOptions, build_plan

    venv, py, freeze, tree = existing_env(work, index, "goodlib==1.0")
    opts = InstallOptions(index_url=index.url, apply=True, venv=venv, log=work / "log.txt", verify=False)
    pre = prepare(build_plan(Recommendation.from_json({"recipe": "demo", "packages": ["gone-app"]}), opts), opts)
    assert pre.ok, pre.problems
    index.config.missing_files = {"gone_lib-1.0-py3-none-any.whl"}
    with pytest.raises(StageError) as err:
        apply(pre, opts)
    assert err.value.ref == "E502", err.value.render()
    assert "404" in (err.value.why or "")
    assert_unchanged(venv, py, freeze, tree)


def test_index_down_is_caught_before_anything_changes(work: Path, index: LocalIndex) -> None:
    venv, py, freeze, tree = existing_env(work, index, "goodlib==1.0")
    down = free_port_url()
    started = time.perf_counter()
    cp = cli(work, "--recipe-file", str(recipe(work, ["demo-app"])), "--index-url", down,
             "--apply", "--venv", str(venv))
    assert cp.returncode == 3
    assert "[E501]" in cp.stderr and "cannot reach" in cp.stderr
    assert "--find-links" in cp.stderr and "--use-pip-config" in cp.stderr  # what to try next
    assert time.perf_counter() - started < 60
    assert_unchanged(venv, py, freeze, tree)


def test_index_going_down_during_install_rolls_back(work: Path, wheels: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The pre-flight passes, then the index stops answering before pip runs."""
    monkeypatch.setenv("PIP_RETRIES", "0")
    from mlprobe.errors import StageError
    from mlprobe.install.apply import apply, prepare
    from mlprobe.install.steps import InstallOptions, build_plan

    with LocalIndex(wheels, IndexConfig(), max_requests=500, lifetime_s=120) as idx:
        venv, py, freeze, tree = existing_env(work, idx, "goodlib==1.0")
        opts = InstallOptions(index_url=idx.url, apply=True, venv=venv, log=work / "log.txt", verify=False)
        plan = build_plan(Recommendation.from_json({"recipe": "demo", "packages": ["demo-app"]}), opts)
        pre = prepare(plan, opts)
        assert pre.ok, pre.problems
    with pytest.raises(StageError) as err:
        apply(pre, opts)
    assert err.value.ref == "E501", err.value.render()
    assert "environment restored" in (err.value.why or "")
    assert_unchanged(venv, py, freeze, tree)


def test_incompatible_wheel_is_named_by_the_index_check(work: Path, index: LocalIndex) -> None:
    venv, py, freeze, tree = existing_env(work, index, "goodlib==1.0")
    cp = cli(work, "--recipe-file", str(recipe(work, ["incompat-lib"])), "--index-url", index.url,
             "--apply", "--venv", str(venv))
    assert cp.returncode == 3
    assert "[E503]" in cp.stderr and "cp27-cp27mu-manylinux1_x86_64" in cp.stdout + cp.stderr
    assert_unchanged(venv, py, freeze, tree)


def test_incompatible_wheel_at_install_time_rolls_back(work: Path, index: LocalIndex) -> None:
    """Past the checks (as if they had passed), pip itself refuses: still nothing changes."""
    from mlprobe.errors import StageError
    from mlprobe.install.apply import apply, prepare
    from mlprobe.install.steps import InstallOptions, build_plan

    venv, py, freeze, tree = existing_env(work, index, "goodlib==1.0")
    opts = InstallOptions(index_url=index.url, apply=True, venv=venv, log=work / "log.txt", verify=False)
    pre = prepare(build_plan(Recommendation.from_json({"recipe": "demo", "packages": ["demo-app"]}), opts), opts)
    pre.packages, pre.resolution = ["demo-app", "incompat-lib"], None  # no resolution: the packages themselves
    with pytest.raises(StageError) as err:
        apply(pre, opts)
    assert err.value.ref == "E503", err.value.render()
    assert_unchanged(venv, py, freeze, tree)


def test_resolver_conflict(work: Path, index: LocalIndex) -> None:
    venv, py, freeze, tree = existing_env(work, index, "goodlib==1.0")
    cp = cli(work, "--recipe-file", str(recipe(work, ["conflict-a", "conflict-b"])), "--index-url", index.url,
             "--apply", "--venv", str(venv))
    assert cp.returncode == 3
    assert "[E504]" in cp.stderr and "conflict" in cp.stderr
    assert_unchanged(venv, py, freeze, tree)
    # And past the dry run, the install step reports the same and restores.
    from mlprobe.errors import StageError
    from mlprobe.install.apply import apply, prepare
    from mlprobe.install.steps import InstallOptions, build_plan

    opts = InstallOptions(index_url=index.url, apply=True, venv=venv, log=work / "log.txt", verify=False)
    pre = prepare(build_plan(Recommendation.from_json({"recipe": "demo", "packages": ["demo-app"]}), opts), opts)
    # --apply installs the resolution it showed; without one it installs the packages themselves
    pre.packages, pre.resolution = ["conflict-a", "conflict-b"], None
    with pytest.raises(StageError) as err:
        apply(pre, opts)
    assert err.value.ref == "E504"
    assert_unchanged(venv, py, freeze, tree)


def test_import_failure_after_install_rolls_back(work: Path, index: LocalIndex) -> None:
    venv, py, freeze, tree = existing_env(work, index, "goodlib==1.0")
    cp = cli(work, "--recipe-file", str(recipe(work, ["bad-import", "demo-app"], imports=["bad_import"],
                                               env={"PLAIDML_DEVICE_IDS": "llvm_cpu.0"})),
             "--index-url", index.url, "--apply", "--venv", str(venv))
    assert cp.returncode == 1
    assert "[E516]" in cp.stderr and "planted" in cp.stderr
    assert_unchanged(venv, py, freeze, tree)  # activate scripts and the start-up hook included
    assert not list(venv.glob("lib/python*/site-packages/_mlprobe_startup*"))


# ---------------------------------------------------------------- new venvs ----------------

def test_failure_removes_half_made_venv(work: Path, index: LocalIndex) -> None:
    venv = work / "cwd" / "new-env"
    cp = cli(work, "--recipe-file", str(recipe(work, ["broken-app"])), "--index-url", index.url,
             "--apply", "--venv", str(venv), "--without-pip")
    assert cp.returncode == 1 and "[E505]" in cp.stderr
    # what `python -m venv` made and what pip recorded go; brokenlib's half-extracted file has no
    # RECORD (pip died on it), so it stays, named, with nothing else around it
    left = sorted(str(p.relative_to(venv)) for p in venv.rglob("*") if p.is_file()) if venv.exists() else []
    assert all("brokenlib" in x for x in left), left
    if left:
        assert "did not record" in cp.stderr and all(str(venv / x) in cp.stderr.replace("\n", "") for x in left)
    else:
        assert "removed the half-made environment" in cp.stderr and not venv.exists()


def test_failure_in_empty_folder_leaves_it_empty(work: Path, index: LocalIndex) -> None:
    venv = work / "cwd" / "empty"
    venv.mkdir()
    cp = cli(work, "--recipe-file", str(recipe(work, ["bad-import"], imports=["bad_import"])),
             "--index-url", index.url, "--apply", "--venv", str(venv), "--without-pip")
    assert cp.returncode == 1 and "[E516]" in cp.stderr
    assert venv.is_dir() and list(venv.iterdir()) == []


def test_refuses_non_empty_folder_that_is_not_a_venv(work: Path, index: LocalIndex) -> None:
    folder = work / "cwd" / "project"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    cp = cli(work, "--recipe-file", str(recipe(work, ["demo-app"])), "--index-url", index.url,
             "--apply", "--venv", str(folder))
    assert cp.returncode == 2 and "[E509]" in cp.stderr
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]


# ---------------------------------------------------------------- Ctrl-C -------------------

def _wait(pred, timeout: float) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


def _interrupt_during_download(work: Path, wheels: Path, venv: Path, target: str,
                               extra: List[str]) -> Tuple["subprocess.CompletedProcess[str]", LocalIndex]:
    # The dry run's download is quick, the install's is slow: the interrupt lands in the install.
    cfg = IndexConfig(slow_files={"big_lib-1.0-py3-none-any.whl"}, slow_chunk=16 * 1024, slow_tick_s=0.05,
                      slow_from_nth=2)
    with LocalIndex(wheels, cfg, max_requests=500, lifetime_s=180) as idx:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mlprobe", "install", "--recipe-file", str(recipe(work, ["big-app"])),
             "--index-url", idx.url, "--apply", "--venv", str(venv), "-v", *extra],
            cwd=work / "cwd", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(work))
        try:
            assert idx.slow_started.wait(120), "the slow download never started"
            time.sleep(0.3)
            if target == "mlprobe":
                proc.send_signal(signal.SIGINT)
            else:
                import psutil

                kids = [c for c in psutil.Process(proc.pid).children(recursive=True)
                        if "pip" in " ".join(c.cmdline())]
                assert kids, "no pip child found"
                kids[0].send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=120)
            assert "installing with" in err, (out, err)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), idx


def test_ctrl_c_to_mlprobe_restores_existing_env(work: Path, wheels: Path) -> None:
    with LocalIndex(wheels, IndexConfig(), max_requests=200, lifetime_s=60) as idx:
        venv, py, freeze, tree = existing_env(work, idx, "goodlib==1.0")
    cp, _ = _interrupt_during_download(work, wheels, venv, "mlprobe", [])
    assert cp.returncode == 130, cp.stderr
    assert "[E507]" in cp.stderr and "interrupted" in cp.stderr
    assert_unchanged(venv, py, freeze, tree)


def test_ctrl_c_to_mlprobe_removes_new_venv(work: Path, wheels: Path) -> None:
    venv = work / "cwd" / "new-env"
    cp, _ = _interrupt_during_download(work, wheels, venv, "mlprobe", ["--without-pip"])
    assert cp.returncode == 130, cp.stderr
    assert "removed the half-made environment" in cp.stderr
    assert not venv.exists()


def test_sigint_to_the_pip_child_restores_existing_env(work: Path, wheels: Path) -> None:
    with LocalIndex(wheels, IndexConfig(), max_requests=200, lifetime_s=60) as idx:
        venv, py, freeze, tree = existing_env(work, idx, "goodlib==1.0")
    cp, _ = _interrupt_during_download(work, wheels, venv, "pip", [])
    assert cp.returncode != 0
    assert "[E507]" in cp.stderr or "[E506]" in cp.stderr, cp.stderr
    assert_unchanged(venv, py, freeze, tree)


# ---------------------------------------------------------------- without --apply ----------

def _snapshot(*roots: Path) -> Dict[str, Dict[str, str]]:
    return {str(r): tree_state(r, skip_pycache=False) for r in roots}


def _fresh_home_env(work: Path, home: Path) -> Dict[str, str]:
    env = cli_env(work)
    env["HOME"] = str(home)
    env.pop("XDG_CACHE_HOME")
    # pip asks `rustc --version` for its user agent; rustup's rustc proxy initialises ~/.rustup in a
    # fresh HOME. That write is rustup's, not mlprobe's or pip's: keep rustc out of this PATH.
    env["PATH"] = os.pathsep.join(d for d in env.get("PATH", "").split(os.pathsep)
                                  if d and not os.path.exists(os.path.join(d, "rustc")))
    # The scan's OpenCL enumeration runs PoCL, whose kernel cache lives in ~/.cache/pocl (the scan's
    # business, not the installer's).
    env["POCL_CACHE_DIR"] = str(work / "pocl-cache")
    return env


def test_without_apply_nothing_is_written(work: Path, index: LocalIndex) -> None:
    home = work / "home"
    home.mkdir()
    (home / ".bashrc").write_text("# mine\n")
    rec = recipe(work, ["demo-app"], env={"HSA_OVERRIDE_GFX_VERSION": "10.3.0"},
                 files=[{"path": "plaidml.json", "json": {"PLAIDML_DEVICE_IDS": ["llvm_cpu.0"]}}])
    before = _snapshot(home, work / "cwd", work / "cache")
    env = _fresh_home_env(work, home)
    cp = subprocess.run([sys.executable, "-m", "mlprobe", "install", "--recipe-file", str(rec), "--index-url",
                         index.url], cwd=work / "cwd", capture_output=True, text=True, timeout=300, env=env)
    assert cp.returncode == 0, cp.stderr
    assert "demo-app" in cp.stdout and "goodlib" in cp.stdout and "nothing was installed" in cp.stdout
    assert _snapshot(home, work / "cwd", work / "cache") == before
    assert not (work / "cwd" / "mlprobe-demo-venv").exists()


def test_without_apply_real_plan_writes_nothing(work: Path) -> None:
    """The whole command on this machine (scan, plan, pip's configured sources, dry run)."""
    pytest.importorskip("mlprobe.plan.planner")
    home = work / "home"
    home.mkdir()
    env = _fresh_home_env(work, home)
    before = _snapshot(home, work / "cwd")
    cp = subprocess.run([sys.executable, "-m", "mlprobe", "install", "--framework", "torch", "--use-pip-config",
                         "--json"], cwd=work / "cwd", capture_output=True, text=True, timeout=600, env=env)
    assert cp.returncode in (0, 3), cp.stderr
    doc = json.loads(cp.stdout)
    assert doc["applied"] is False
    assert _snapshot(home, work / "cwd") == before


# ---------------------------------------------------------------- uv (when on PATH) ----------

needs_uv = pytest.mark.skipif(UV_DIR is None, reason="uv is not installed")


@needs_uv
def test_uv_installs_and_rolls_back(work: Path, index: LocalIndex) -> None:
    venv, py, freeze, tree = existing_env(work, index, "goodlib==1.0")
    cp = cli(work, "--recipe-file", str(recipe(work, ["broken-app"])), "--index-url", index.url,
             "--apply", "--venv", str(venv), "--installer", "uv", "-v", uv_on_path=True)
    assert cp.returncode == 1, cp.stderr
    assert "installing with uv" in cp.stderr and "[E505]" in cp.stderr
    assert_unchanged(venv, py, freeze, tree)
    cp = cli(work, "--recipe-file", str(recipe(work, ["demo-app"])), "--index-url", index.url,
             "--apply", "--venv", str(venv), uv_on_path=True)  # auto picks uv
    assert cp.returncode == 0, cp.stderr
    assert "installer: uv" in cp.stdout
    assert "demo-app==1.0" in pip_freeze(py)


@needs_uv
def test_use_pip_config_means_pip_even_with_uv(work: Path, index: LocalIndex) -> None:
    cp = cli(work, "--recipe-file", str(recipe(work, ["demo-app"])), "--use-pip-config", "--find-links",
             str(index.folder), "--installer", "uv", uv_on_path=True)
    assert cp.returncode == 2 and "[E523]" in cp.stderr


# ---------------------------------------------------------------- interpreters ---------------

def test_system_interpreter_marked_externally_managed_is_refused(work: Path, index: LocalIndex) -> None:
    system = Path("/usr/bin/python3")
    if not system.exists():
        pytest.skip("no /usr/bin/python3")
    from mlprobe.install.venv import inspect_interpreter

    if not inspect_interpreter(str(system)).externally_managed:
        pytest.skip("this OS's python3 is not marked EXTERNALLY-MANAGED")
    cp = cli(work, "--recipe-file", str(recipe(work, ["demo-app"])), "--index-url", index.url,
             "--apply", "--system", "--python", str(system))
    assert cp.returncode == 2 and "[E508]" in cp.stderr and "PEP 668" in cp.stderr


def test_new_venv_with_another_python_version(work: Path, index: LocalIndex) -> None:
    from mlprobe.errors import StageError
    from mlprobe.install.venv import find_python

    other = "3.12" if sys.version_info[:2] != (3, 12) else "3.11"
    try:
        find_python(other)
    except StageError:
        pytest.skip(f"no Python {other} here")
    venv = work / "cwd" / "other-py"
    cp = cli(work, "--recipe-file", str(recipe(work, ["demo-app"])), "--index-url", index.url,
             "--apply", "--venv", str(venv), "--python", other, "--without-pip", "--json")
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(cp.stdout)
    assert doc["target"]["python_version"].startswith(other + ".")
    assert f"version = {other}" in (venv / "pyvenv.cfg").read_text()
    assert "demo-app==1.0" in pip_freeze(venv / "bin" / "python")


def test_system_mode_transaction(work: Path, index: LocalIndex) -> None:
    """--system on an interpreter that is not externally managed (a venv's python stands in for one,
    so that no test touches this machine's own interpreter): rolls back, then installs, and prints
    the env vars instead of editing any shell file."""
    venv, py, freeze, tree = existing_env(work, index, "goodlib==1.0")
    cp = cli(work, "--recipe-file", str(recipe(work, ["broken-app"])), "--index-url", index.url,
             "--apply", "--system", "--python", str(py))
    assert cp.returncode == 1 and "[E505]" in cp.stderr and "environment restored" in cp.stderr
    drop_half_extracted(venv, tree, cp.stderr)
    assert_unchanged(venv, py, freeze, tree)
    cp = cli(work, "--recipe-file", str(recipe(work, ["demo-app"], env={"HSA_OVERRIDE_GFX_VERSION": "11.0.0"})),
             "--index-url", index.url, "--apply", "--system", "--python", str(py))
    assert cp.returncode == 0, cp.stderr
    assert "export HSA_OVERRIDE_GFX_VERSION='11.0.0'" in cp.stdout
    assert "HSA_OVERRIDE" not in (venv / "bin" / "activate").read_text()
    assert "demo-app==1.0" in pip_freeze(py)
