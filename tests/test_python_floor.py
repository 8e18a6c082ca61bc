"""The package runs on the oldest Python its metadata admits (pyproject's requires-python), checked
with vermin over every module (tests/pyfloor.py); the code that runs in the target interpreter has its
own floor, checked in tests/test_verify_payload.py and tests/test_shims.py."""

from __future__ import annotations

import ast

import pytest

from .pyfloor import ROOT, TARGET_FLOOR, package_floor, too_new

MODULES = sorted((ROOT / "mlprobe").rglob("*.py"))


def test_every_module_runs_on_the_floor_of_requires_python() -> None:
    floor = package_floor()
    assert floor >= TARGET_FLOOR  # the payload's floor is the lower one: it runs wherever mlprobe runs
    found = [msg for path in MODULES
             for msg in too_new(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)), floor)]
    assert found == []


@pytest.mark.parametrize("source, needs", [
    ("@buttons[0].clicked.connect\ndef f():\n    pass\n", "relaxed decorators"),
    ("for i in x:\n    try:\n        pass\n    finally:\n        continue\n", "continue in finally"),
    ("d = {} | {}\n", "dict union"),
    ("import importlib.metadata\n", "'importlib.metadata' module"),
    ("x = 'ab'.removeprefix('a')\n", "'str.removeprefix' member"),
])
def test_the_checker_refuses_what_the_grammar_check_let_through(source: str, needs: str) -> None:
    """ast.parse(feature_version=(3, 7)), the check these tests used before, accepts each of these;
    vermin says what needs a newer Python and which release."""
    ast.parse(source, feature_version=(3, 7))
    (msg,) = too_new(source, "x.py", TARGET_FLOOR)
    assert needs in msg and "needs Python 3." in msg


def test_a_novm_comment_excuses_its_own_line_only() -> None:
    guarded = "try:\n    import tomllib  # novm: tomli below\nexcept ImportError:\n    import tomli as tomllib\n"
    assert too_new(guarded, "x.py", (3, 9)) == []
    (msg,) = too_new(guarded + "import tomllib\n", "x.py", (3, 9))
    assert "'tomllib' module requires" in msg and "needs Python 3.11" in msg
