"""A recipe's settings reach every start of a venv's Python, as people start it: a shell where
`activate` ran, `V/bin/python` from an IDE or cron (no activate, almost no environment), `uv run`, a
Jupyter kernel. Real venvs, the real CLI (`mlprobe install --recipe plaidml-keras --settings-only`,
whose settings are plain variables: KERAS_BACKEND and PlaidML's), then `--detach`. And the refusals:
a `.pth` of the hook's name that the person wrote, a hook edited by hand, a site-packages this user
cannot write: a clear message, the person's files untouched, nothing half-written."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest

from .uv_path import UV

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX venv layout and shells")

RECIPE = "plaidml-keras"
WANT = "plaidml.keras.backend"  # the recipe's KERAS_BACKEND (mlprobe/knowledge: recipes)
SHOW = "import os; print(os.environ.get('KERAS_BACKEND'))"


def mlprobe(*argv: str, env: Optional[Dict[str, str]] = None, cwd: Optional[Path] = None) -> "subprocess.CompletedProcess[str]":
    base = dict(os.environ if env is None else env)
    for k in ("KERAS_BACKEND", "VIRTUAL_ENV", "MLPROBE_HOOK"):
        base.pop(k, None)
    return subprocess.run([sys.executable, "-m", "mlprobe", *argv], capture_output=True, text=True, timeout=300,
                          env=base, cwd=cwd)


def make_venv(where: Path, pip: bool = False) -> Path:
    args = [sys.executable, "-m", "venv"] + ([] if pip else ["--without-pip"]) + [str(where)]
    subprocess.run(args, check=True, capture_output=True, timeout=300)
    return where


def site_of(venv: Path) -> Path:
    (site,) = list(venv.glob("lib/python*/site-packages"))
    return site


def plain(venv: Path, *env: str, code: str = SHOW) -> str:
    """`V/bin/python` as cron, systemd or an IDE starts it: nothing activated, almost no environment."""
    r = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", *env, str(venv / "bin" / "python"), "-c", code],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def tree(folder: Path) -> Dict[str, str]:
    """Every file under `folder` with its digest (byte code left out: Python writes it on its own)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            out[str(p.relative_to(folder))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture()
def venv(tmp_path: Path) -> Path:
    return make_venv(tmp_path / "v")


def settings_only(venv: Path, *extra: str, env: Optional[Dict[str, str]] = None) -> "subprocess.CompletedProcess[str]":
    return mlprobe("install", "--recipe", RECIPE, "--settings-only", "--venv", str(venv), *extra, env=env)


@pytest.mark.slow
def test_every_start_gets_the_setting_and_the_persons_value_wins(venv: Path) -> None:
    before = tree(venv)
    r = settings_only(venv, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["env"]["KERAS_BACKEND"] == WANT and doc["hook"], doc
    # an IDE, cron, systemd: V/bin/python with nothing activated
    assert plain(venv) == WANT
    r0 = subprocess.run([str(venv / "bin" / "python"), "-c", SHOW], capture_output=True, text=True, timeout=60,
                        env={})  # not even PATH
    assert r0.stdout.strip() == WANT, r0.stderr
    # a value the person set before Python started wins
    assert plain(venv, "KERAS_BACKEND=tensorflow") == "tensorflow"
    # the documented switch turns the hook off
    for off in ("0", "off", "no", "false", "OFF"):
        assert plain(venv, f"MLPROBE_HOOK={off}") == "None"
    assert plain(venv, "MLPROBE_HOOK=1") == WANT
    # a child of such a start is told which values the hook set (doctor tells them from the person's)
    assert plain(venv, code="import os; print(os.environ.get('_MLPROBE_HOOK_SET'))").split(",")[0] in \
        ("KERAS_BACKEND", "PLAIDML_DEVICE_IDS", "PLAIDML_EXPERIMENTAL")
    assert plain(venv, "KERAS_BACKEND=tensorflow", code="import os; print(os.environ.get('_MLPROBE_HOOK_SET'))") \
        .find("KERAS_BACKEND") == -1
    # the activated shell agrees: the recipe's value, or the person's when set before activate
    act = f". '{venv}/bin/activate' && python -c \"{SHOW}\""
    for shell_env, want in (({}, WANT), ({"KERAS_BACKEND": "tensorflow"}, "tensorflow")):
        sh = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", *(f"{k}={v}" for k, v in shell_env.items()),
                             "bash", "-c", act], capture_output=True, text=True, timeout=60)
        assert sh.stdout.strip() == want, sh.stderr
    # one mechanism: the PlaidML shim is imported by the hook, no .pth of its own
    site = site_of(venv)
    pths = sorted(p.name for p in site.glob("*.pth"))
    assert [p for p in pths if "mlprobe" in p] == ["_mlprobe_startup.pth"], pths
    # the second run changes nothing
    again = tree(venv)
    assert settings_only(venv).returncode == 0
    assert tree(venv) == again
    # detach: everything mlprobe added goes, the venv is as it was
    d = mlprobe("install", "--detach", str(venv), "--json")
    assert d.returncode == 0, d.stderr
    assert tree(venv) == before, set(tree(venv)) ^ set(before)
    assert plain(venv) == "None"


@pytest.mark.skipif(UV is None, reason="uv is not installed (.ci/run provides it)")
def test_uv_run_gets_the_setting(tmp_path: Path) -> None:
    assert UV is not None
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "proj"\nversion = "0"\nrequires-python = ">=3.8"\n'
                                            "dependencies = []\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "KERAS_BACKEND")}
    env["UV_OFFLINE"] = "1"  # nothing to download: the project has no dependencies
    subprocess.run([UV, "venv", "--python", sys.executable, str(project / ".venv")], check=True,
                   capture_output=True, timeout=120, cwd=project, env=env)
    before = tree(project / ".venv")
    assert settings_only(project / ".venv").returncode == 0  # uv's own activate scripts (bat, nu, xsh…) too
    r = subprocess.run([UV, "run", "--no-sync", "python", "-c", SHOW], capture_output=True, text=True, timeout=120,
                       cwd=project, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == WANT
    assert mlprobe("install", "--detach", str(project / ".venv")).returncode == 0
    assert tree(project / ".venv") == before


def test_kernel_spec_carries_the_settings_and_goes_with_detach(venv: Path, tmp_path: Path) -> None:
    data = tmp_path / "jupyter-data"
    env = dict(os.environ, JUPYTER_DATA_DIR=str(data))
    r = settings_only(venv, "--kernel", "--user-kernel", "--json", env=env)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    specs = [Path(p) for p in doc["kernels"]]
    assert len(specs) == 2, doc
    assert any(str(p).startswith(str(venv / "share" / "jupyter" / "kernels")) for p in specs)
    assert any(str(p).startswith(str(data / "kernels")) for p in specs)
    for p in specs:
        spec = json.loads(p.read_text(encoding="utf-8"))
        assert spec["env"]["KERAS_BACKEND"] == WANT
        assert spec["argv"][0].startswith(str(venv)) and "ipykernel_launcher" in spec["argv"]
        assert "mlprobe" in spec["display_name"] and spec["metadata"]["mlprobe"]["recipe"] == RECIPE
    # a kernel spec of the person's own, in the same user folder, is left alone by detach
    mine = data / "kernels" / "mine" / "kernel.json"
    mine.parent.mkdir(parents=True)
    mine.write_text('{"argv": ["python"], "display_name": "mine", "language": "python"}', encoding="utf-8")
    d = mlprobe("install", "--detach", str(venv), env=env)
    assert d.returncode == 0, d.stderr
    assert not any(p.exists() for p in specs)
    assert mine.read_text(encoding="utf-8").startswith('{"argv"')


@pytest.mark.slow
def test_a_pth_the_person_wrote_is_left_alone(venv: Path) -> None:
    site = site_of(venv)
    theirs = site / "_mlprobe_startup.pth"
    theirs.write_text("import my_own_thing\n", encoding="utf-8")
    before = tree(venv)
    r = settings_only(venv)
    assert r.returncode != 0
    assert "E562" in r.stderr and "was not written by mlprobe" in r.stderr and "Traceback" not in r.stderr
    assert tree(venv) == before  # nothing written: not the activate scripts either
    forced = settings_only(venv, "--force")
    assert forced.returncode == 0, forced.stderr
    assert plain(venv) == WANT


@pytest.mark.slow
def test_a_hook_edited_by_hand_is_left_alone(venv: Path) -> None:
    assert settings_only(venv).returncode == 0
    hook = site_of(venv) / "_mlprobe_startup.py"
    text = hook.read_text(encoding="utf-8").replace(WANT, "my.backend")
    hook.write_text(text, encoding="utf-8")
    before = tree(venv)
    r = settings_only(venv)
    assert r.returncode != 0
    assert "E563" in r.stderr and "edited by hand" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert tree(venv) == before
    assert plain(venv) == "my.backend"  # the person's edit still works
    # detach takes out the rest and keeps the edited hook, saying so
    d = mlprobe("install", "--detach", str(venv), "--json")
    assert d.returncode == 0, d.stderr
    kept = json.loads(d.stdout)["kept"]
    assert any("_mlprobe_startup.py" in k and "edited" in k for k in kept), kept
    assert hook.read_text(encoding="utf-8") == text and plain(venv) == "my.backend"
    assert "KERAS_BACKEND" not in (venv / "bin" / "activate").read_text(encoding="utf-8")
    assert mlprobe("install", "--detach", str(venv), "--force").returncode == 0
    assert not hook.exists() and plain(venv) == "None"


def _other_user_python() -> List[str]:
    """A command that runs Python as a user who cannot write the venv (root may write anything), with
    this environment's packages and this checkout importable; skips where there is no such way."""
    if os.geteuid() != 0:
        return [sys.executable]
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot take away write permission")
    # this interpreter may live where that user cannot go (root's home): a system one of the same version
    probe = "import sys; print('%d.%d' % sys.version_info[:2])"
    for cand in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.isfile(cand):
            r = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--", cand, "-c", probe],
                               capture_output=True, text=True, timeout=30)
            if r.returncode == 0 and r.stdout.strip() == "%d.%d" % sys.version_info[:2]:
                return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--", cand]
    pytest.skip("no Python of this version that another user may run")


@pytest.fixture()
def shared_tmp() -> Iterator[Path]:
    """A folder every user can enter (pytest's tmp_path is private to its user)."""
    d = Path(tempfile.mkdtemp(prefix="mlprobe-ro-"))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_a_read_only_site_packages_is_refused_with_nothing_written(shared_tmp: Path) -> None:
    import sysconfig

    python = _other_user_python()
    venv = shared_tmp / "v"
    subprocess.run([python[-1], "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True,
                   timeout=300)
    site = site_of(venv)
    os.chmod(site, 0o555)
    os.chmod(venv / "bin", 0o555)
    before = tree(venv)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "KERAS_BACKEND")}
    home = shared_tmp / "home"  # that user's own: mlprobe keeps its locks and cache there
    home.mkdir()
    os.chmod(home, 0o777)
    env["HOME"] = str(home)
    env.pop("XDG_CACHE_HOME", None)
    paths = [str(Path(__file__).resolve().parent.parent), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    r = subprocess.run([*python, "-m", "mlprobe", "install", "--recipe", RECIPE, "--settings-only", "--venv", str(venv)],
                       capture_output=True, text=True, timeout=300, env=env, cwd=shared_tmp)
    if "No module named" in r.stderr:
        pytest.skip(f"this environment's packages are not readable by another user: {r.stderr.strip()[-200:]}")
    assert r.returncode != 0
    assert "E561" in r.stderr and "not writable" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert tree(venv) == before


@pytest.mark.slow
@pytest.mark.registry
def test_a_real_jupyter_kernel_gets_the_settings(tmp_path: Path) -> None:
    """ipykernel in the venv before the install: the kernel spec is written without asking, `jupyter
    kernelspec list` from that venv shows it, and a kernel started by jupyter_client (from a process
    with almost no environment, as a JupyterLab service would be) has the recipe's settings."""
    venv = make_venv(tmp_path / "v", pip=True)
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "ipykernel", "jupyter_client"],
                         capture_output=True, text=True, timeout=900)
    if pip.returncode != 0:
        pytest.skip(f"ipykernel could not be installed here: {pip.stderr.strip()[-300:]}")
    r = settings_only(venv, "--json")
    assert r.returncode == 0, r.stderr
    (spec,) = json.loads(r.stdout)["kernels"]
    name = Path(spec).parent.name
    listed = subprocess.run([str(venv / "bin" / "jupyter"), "kernelspec", "list", "--json"], capture_output=True,
                            text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert listed.returncode == 0, listed.stderr
    specs = json.loads(listed.stdout)["kernelspecs"]
    assert name in specs and "mlprobe" in specs[name]["spec"]["display_name"], specs
    client = (
        "import sys\n"
        "from jupyter_client.manager import start_new_kernel\n"
        f"km, kc = start_new_kernel(kernel_name={name!r})\n"
        "out = []\n"
        "kc.execute_interactive(\"import os; print(os.environ.get('KERAS_BACKEND'))\", timeout=60,\n"
        "    output_hook=lambda m: out.append(m['content'].get('text', '')) if m['msg_type'] == 'stream' else None)\n"
        "kc.stop_channels(); km.shutdown_kernel(now=True)\n"
        "print(''.join(out).strip())\n")
    run = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", f"HOME={tmp_path}", str(venv / "bin" / "python"), "-c",
                          client], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1] == WANT
    d = mlprobe("install", "--detach", str(venv))
    assert d.returncode == 0, d.stderr
    assert not Path(spec).exists() and (venv / "bin" / "jupyter").exists()  # the packages stay


@pytest.mark.slow
def test_verify_runs_the_target_as_a_plain_start_gets_it(venv: Path) -> None:
    """verify's child gets what `V/bin/python` gets when an IDE starts it: the hook's settings, and none
    when the hook is off, said in `environment`; never the activate script's values copied in."""
    assert settings_only(venv).returncode == 0
    py = str(venv / "bin" / "python")
    on = mlprobe("verify", "--python", py, "--json", "--quick", "--no-cpu-peers", "--baseline-python", py)
    doc = json.loads(on.stdout)
    assert doc["request"]["env"]["KERAS_BACKEND"] == WANT
    assert "without activate" in doc["environment"] and "start-up hook sets KERAS_BACKEND" in doc["environment"]
    # mlprobe() drops MLPROBE_HOOK from the environment it is given: set it here
    env_off = dict(os.environ)
    env_off.pop("KERAS_BACKEND", None)
    r = subprocess.run([sys.executable, "-m", "mlprobe", "verify", "--python", py, "--json", "--quick",
                        "--no-cpu-peers", "--baseline-python", py], capture_output=True, text=True, timeout=300,
                       env=dict(env_off, MLPROBE_HOOK="0"))
    doc = json.loads(r.stdout)
    assert not (doc["request"]["env"] or {}).get("KERAS_BACKEND")
    assert "hook is off" in doc["environment"] and "not set" in doc["environment"], doc["environment"]
