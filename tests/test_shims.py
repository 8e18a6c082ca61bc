"""The PlaidML compatibility shim, tested in child interpreters (the .pth runs at start-up), with
stand-in `keras`/`plaidml` packages that use exactly the names Python 3.10+/numpy 2 removed; and,
marked slow, the real plaidml-keras 0.7.0 in a venv, verified on llvm_cpu.0."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import List, Optional

import pytest

from mlprobe.shims.plaidml_compat import (
    MODULE_NAME,
    PTH_NAME,
    SHIM_SOURCE,
    install_shim,
    uninstall_shim,
    write_settings,
)

from .pyfloor import TARGET_FLOOR, old_python, too_new

HAS_NUMPY = importlib.util.find_spec("numpy") is not None


def run_py(site: Path, code: str, extra_path: Optional[Path] = None, python: str = sys.executable) -> str:
    """Run `code` in a child whose site dir `site` is processed like site-packages (.pth files run)."""
    boot = f"import site; site.addsitedir({str(site)!r})\n"
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if extra_path:
        env["PYTHONPATH"] = str(extra_path)
    proc = subprocess.run([python, "-c", boot + textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _with_hook(site: "Path | str") -> Path:
    """The shim as `mlprobe install` delivers it: its module, loaded by the venv's one start-up hook."""
    from mlprobe.venvconf import hook

    module = install_shim(site)
    hook.write(Path(site), {}, [MODULE_NAME])
    return module


def test_install_writes_the_module_only_and_the_start_up_hook_loads_it(tmp_path: Path) -> None:
    legacy = tmp_path / PTH_NAME
    legacy.write_text(f"import {MODULE_NAME}\n")  # what an older mlprobe wrote: one mechanism now
    module = install_shim(tmp_path)
    assert module == tmp_path / f"{MODULE_NAME}.py" and not legacy.exists()
    first = module.read_bytes()
    install_shim(tmp_path)
    assert module.read_bytes() == first
    assert [p.name for p in tmp_path.glob("*.pth")] == []
    _with_hook(tmp_path)
    assert [p.name for p in tmp_path.glob("*.pth")] == ["_mlprobe_startup.pth"]
    out = run_py(tmp_path, "import sys; print('_mlprobe_plaidml_compat' in sys.modules)")
    assert out.strip() == "True"
    assert uninstall_shim(tmp_path) and not module.exists()
    with pytest.raises(FileNotFoundError):
        install_shim(tmp_path / "missing")


def test_the_file_run_by_hand_still_sets_itself_up(tmp_path: Path) -> None:
    from mlprobe.shims import plaidml_compat

    proc = subprocess.run([sys.executable, plaidml_compat.__file__, str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / PTH_NAME).read_text() == f"import {MODULE_NAME}\n"


def test_the_shim_and_the_hook_that_loads_it_run_on_python37() -> None:
    """vermin, not ast.parse(feature_version=(3, 7)), which accepts the syntax and modules of later
    releases (tests/pyfloor.py); the start-up hook loads the shim, so it has the same floor."""
    from mlprobe.venvconf import hook

    assert too_new(SHIM_SOURCE, "_mlprobe_plaidml_compat.py", TARGET_FLOOR) == []
    text = hook.render({"PLAIDML_DEVICE_IDS": "llvm_cpu.0"}, [MODULE_NAME], recipe="plaidml-opencl", label="x")
    assert too_new(text, "_mlprobe_startup.py", TARGET_FLOOR) == []


def test_on_a_real_python37_the_hook_loads_the_shim_and_says_nothing(tmp_path: Path) -> None:
    exe, why = old_python(TARGET_FLOOR)
    if exe is None:
        pytest.skip(why)
    _with_hook(tmp_path)
    code = (f"import site; site.addsitedir({str(tmp_path)!r})\n"
            "import sys; print('%d.%d' % sys.version_info[:2], '_mlprobe_plaidml_compat' in sys.modules)\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([exe, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0 and proc.stdout.split() == ["3.7", "True"], proc.stderr
    assert proc.stderr == ""  # a start-up line that fails only prints "Error processing line ...", exit 0


def test_collections_aliases_exist_at_startup(tmp_path: Path) -> None:
    _with_hook(tmp_path)
    out = run_py(tmp_path, """
        import collections, collections.abc
        names = ["Iterable", "Mapping", "MutableMapping", "Sequence", "Callable", "Hashable", "Set"]
        print(all(getattr(collections, n) is getattr(collections.abc, n) for n in names))
        from collections import Iterable, OrderedDict
        print(OrderedDict.__module__)
    """)
    assert out.split() == ["True", "collections"]


def test_without_the_shim_old_keras_imports_fail_on_this_python(tmp_path: Path) -> None:
    if sys.version_info < (3, 10):
        pytest.skip("collections ABC aliases still exist before Python 3.10")
    proc = subprocess.run([sys.executable, "-c", "from collections import Iterable"], capture_output=True,
                          text=True)
    assert proc.returncode != 0 and "Iterable" in proc.stderr


@pytest.mark.skipif(not HAS_NUMPY, reason="numpy is not importable here")
def test_numpy_and_inspect_names_come_back_when_keras_is_imported(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _with_hook(site)
    # A stand-in for keras 2.2.4: the lines that break on Python 3.11 + numpy 2.
    fake = tmp_path / "pkgs"
    (fake / "keras").mkdir(parents=True)
    (fake / "keras" / "__init__.py").write_text(textwrap.dedent("""
        from collections import Iterable
        import inspect
        import numpy as np
        best = np.Inf
        worst = -np.Inf
        kinds = (np.float, np.int, np.bool, np.object, np.string_, np.unicode_, np.float_, np.NaN)
        spec = inspect.getargspec(lambda a, b=1: None)
    """))
    out = run_py(site, """
        import numpy
        had = hasattr(numpy, "Inf")  # numpy alone is left as it is: only keras' import patches it
        import keras
        print(had, keras.best, keras.spec.args, keras.spec.defaults, keras.kinds[0] is float)
    """, extra_path=fake)
    import numpy

    expect_had = "Inf" in vars(numpy)
    assert out.split() == [str(expect_had), "inf", "['a',", "'b']", "(1,)", "True"]


OLD_FINDER = '''
import importlib, os, sys, types

def install_backend(import_path='keras.backend'):
    sys.meta_path = [_PlaidMLBackendFinder(import_path)] + sys.meta_path

class _PlaidMLBackendFinder(object):
    # The plaidml 0.7.0 finder, reduced: the pre-3.4 import protocol only.
    def __init__(self, repname):
        self._repname = repname

    def find_module(self, fullname, path=None):
        if fullname != self._repname:
            return None
        self._keras_path = [os.path.join(elt, 'backend') for elt in path]
        return self

    def load_module(self, fullname):
        mod = types.ModuleType(self._repname)
        mod.__path__ = self._keras_path
        sys.modules[fullname] = mod
        mod.backend = lambda: 'plaidml'
        return mod
'''


def _interpreters() -> List[str]:
    """This interpreter, plus python3.12/3.13 where they run (Python 3.12 dropped find_module), plus
    MLPROBE_TEST_EXTRA_PYTHONS (os.pathsep-separated paths)."""
    out = [sys.executable]
    names = ["python3.12", "python3.13"] + [p for p in os.environ.get("MLPROBE_TEST_EXTRA_PYTHONS", "").split(os.pathsep) if p]
    for name in names:
        exe = shutil.which(name)
        if exe and exe not in out and subprocess.run([exe, "-c", "pass"], capture_output=True).returncode == 0:
            out.append(exe)
    return out


@pytest.mark.parametrize("python", _interpreters())
def test_plaidml_backend_finder_works_on_python_312_import_protocol(tmp_path: Path, python: str) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _with_hook(site)
    fake = tmp_path / "pkgs"
    (fake / "plaidml" / "keras").mkdir(parents=True)
    (fake / "plaidml" / "__init__.py").write_text("")
    (fake / "plaidml" / "keras" / "__init__.py").write_text(OLD_FINDER)
    (fake / "keras" / "backend").mkdir(parents=True)
    (fake / "keras" / "__init__.py").write_text("")
    (fake / "keras" / "backend" / "__init__.py").write_text("def backend():\n    return 'tensorflow'\n")
    out = run_py(site, """
        import warnings
        warnings.simplefilter("error", ImportWarning)
        import plaidml.keras
        plaidml.keras.install_backend()
        import keras.backend
        print(keras.backend.backend())
    """, extra_path=fake, python=python)
    assert out.strip() == "plaidml"


def test_write_settings_is_what_plaidml_reads(tmp_path: Path) -> None:
    p = write_settings(tmp_path / "plaidml.json", ["llvm_cpu.0"], experimental=True)
    doc = json.loads(p.read_text())
    assert doc == {"PLAIDML_DEVICE_IDS": ["llvm_cpu.0"], "PLAIDML_EXPERIMENTAL": True}


# ------------------------------------------------------------------ the real thing (slow)

def _plaidml_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    given = os.environ.get("MLPROBE_TEST_PLAIDML_PYTHON")
    if given:
        return given
    venv = tmp_path_factory.mktemp("plaidml") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = str(venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python"))
    proc = subprocess.run([py, "-m", "pip", "install", "-q", "plaidml-keras==0.7.0"], capture_output=True,
                          text=True, timeout=900)
    if proc.returncode != 0:
        pytest.skip("pip could not install plaidml-keras 0.7.0 here: " + proc.stderr.strip()[-300:])
    return py


@pytest.mark.slow
def test_real_plaidml_keras_verifies_on_llvm_cpu_and_says_it_is_a_cpu(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    from mlprobe.verify import run_verify

    py = _plaidml_python(tmp_path_factory)
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    _with_hook(site)
    # Small speed figures: llvm_cpu.0 needs seconds per batch of 128; this test is about honesty.
    doc = run_verify(python=py, framework="plaidml", cpu_peers=False,
                     overrides={"speed_batch": 32, "speed_repeats": 3, "speed_budget_s": 1.0})
    assert doc["frameworks"][0]["status"] == "verified", doc["frameworks"]
    rec = next(r for r in doc["results"] if r["device"] == "llvm_cpu.0")
    assert rec["kind"] == "cpu"
    assert rec["verdict"] == "CPU", rec["reason"]
    assert "not on a GPU" in rec["reason"] and "accelerates nothing" in rec["reason"]
    assert rec["correctness"]["passed"], rec["correctness"]
    assert rec["learning"]["passed"], rec["learning"]
    assert rec["speed"]["images_per_s"] > 0
    assert doc["exit_code"] == 0


def test_shim_file_installs_itself_with_the_target_python(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`mlprobe plan` shows `python .../plaidml_compat.py`: the environment's own python must be able
    to run that file with nothing but the standard library."""
    import subprocess
    import sys

    from mlprobe.shims import plaidml_compat

    site = tmp_path / "site"
    site.mkdir()
    proc = subprocess.run([sys.executable, "-S", "-I", plaidml_compat.__file__, str(site)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert any(p.suffix == ".pth" for p in site.iterdir())
