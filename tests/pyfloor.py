"""The oldest Python a source file must run on, checked with vermin.

vermin knows in which release each syntax form, module, function and keyword argument appeared
(named expressions and `importlib.metadata` in 3.8, `str.removeprefix` in 3.9, `match` in 3.10).
`ast.parse(feature_version=(3, 7))` only knows the grammar, and accepts most of what came later.
A line that uses something newer behind its own fallback (`try: import tomllib except ImportError`)
says so with vermin's `# novm` comment, so that every other use of the same name is still checked.

Two floors: the package's own (pyproject's requires-python), and the one of the code that runs in the
*target* interpreter (the verify payload, the PlaidML start-up shim), which mlprobe only starts as a
child: verify accepts any Python 3.7 or newer there (E602), PlaidML's environments are often 3.7."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, List, Optional, Tuple

import pytest
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parent.parent

# The verify payload and the shim run in the interpreter verify is pointed at, not in mlprobe's.
TARGET_FLOOR: Tuple[int, int] = (3, 7)


def package_floor() -> Tuple[int, int]:
    """The lowest Python pyproject.toml's requires-python admits, as (major, minor)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.9/3.10
        import tomli as tomllib  # type: ignore[import-not-found, no-redef, unused-ignore]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lows = [spec.version for spec in SpecifierSet(project["requires-python"]) if spec.operator == ">="]
    assert lows, f"requires-python {project['requires-python']!r} has no lower bound"
    major, minor = (int(x) for x in re.findall(r"\d+", lows[0])[:2])
    return major, minor


def too_new(source: str, path: str, floor: Tuple[int, int]) -> List[str]:
    """What in `source` needs a Python newer than `floor`, in vermin's words ([] when it runs there)."""
    vermin = pytest.importorskip("vermin", reason="vermin is not installed (the `test` extra brings it)")

    def visit(verbose: int) -> Any:
        config = vermin.Config()
        assert config.add_target(floor, exact=False)  # "-t=3.7-": the file must run on 3.7
        config.set_only_show_violations(True)
        config.set_show_tips(False)
        config.set_verbose(verbose)  # 2: the reasons, one a line (and three times slower)
        return vermin.visit(source, config, path)

    visitor = visit(0)
    if not isinstance(visitor, vermin.SourceVisitor):  # this interpreter could not even parse it
        return [f"{path} does not parse (vermin: needs {visitor})"]
    if not visitor.found_violation():
        return []
    visitor = visit(2)
    needs = visitor.minimum_versions()[1]
    lines = [ln for ln in visitor.output_text().splitlines() if ln.strip()]
    return [f"{path} needs Python {needs[0]}.{needs[1]}: " + "; ".join(lines)]


def old_python(floor: Tuple[int, int] = TARGET_FLOOR) -> Tuple[Optional[str], str]:
    """A working interpreter of exactly `floor` and "", or None and why there is none. Looked for in
    MLPROBE_TEST_OLD_PYTHON, then `python3.7` on PATH, then pyenv's and uv's installed versions."""
    import glob
    import os
    import shutil
    import subprocess

    name = f"python{floor[0]}.{floor[1]}"
    candidates = [os.environ.get("MLPROBE_TEST_OLD_PYTHON") or "", shutil.which(name) or ""]
    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    candidates += sorted(glob.glob(os.path.join(pyenv, "versions", f"{floor[0]}.{floor[1]}.*", "bin", name)))
    candidates += sorted(glob.glob(os.path.expanduser(f"~/.local/share/uv/python/cpython-{floor[0]}.{floor[1]}.*/bin/{name}")))
    for exe in filter(None, candidates):
        try:
            out = subprocess.run([exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                 capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and out.stdout.strip() == f"{floor[0]}.{floor[1]}":
            return exe, ""
    return None, (f"no working {name}: not in MLPROBE_TEST_OLD_PYTHON, on PATH, under {pyenv}/versions "
                  f"or among uv's Pythons")
