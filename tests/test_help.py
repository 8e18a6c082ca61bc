"""`--help` as a newcomer reads it: no line over 100 columns, a description for every command, a
`--python` that says what it takes on each command, `--framework` choices in one order, usage errors
in the words of the usage line, and a completion script that completes recipe ids."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import Iterator, List, Tuple

import pytest

from mlprobe.cli import build_parser

from .conftest import ROOT


def parsers() -> Iterator[Tuple[str, argparse.ArgumentParser]]:
    stack: List[Tuple[str, argparse.ArgumentParser]] = [("mlprobe", build_parser())]
    while stack:
        name, p = stack.pop()
        yield name, p
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack.extend((f"{name} {k}", v) for k, v in action.choices.items())


ALL = list(parsers())


@pytest.mark.parametrize("columns", [None, "300", "80"])
def test_no_help_line_is_wider_than_100_columns(monkeypatch: pytest.MonkeyPatch, columns: "str | None") -> None:
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    limit = min(100, int(columns)) if columns else 100
    for name, p in parsers():
        wide = [ln for ln in p.format_help().splitlines() if len(ln) > limit and "`" not in ln]
        assert not wide, (name, wide)


def test_every_command_has_a_description() -> None:
    for name, p in ALL:
        assert p.description and len(p.description) > 10, name


def test_python_says_what_it_takes_on_each_command() -> None:
    for name, p in ALL:
        for action in p._actions:
            if "--python" in action.option_strings:
                text = (action.help or "").lower()
                assert ("x.y" in text) or ("path" in text), (name, action.help)
                assert (("x.y" in text) == ("X.Y" in str(action.metavar))) and \
                    (("path" in text) == ("PATH" in str(action.metavar))), (name, action.metavar, action.help)


def test_framework_choices_come_in_one_order() -> None:
    orders = []
    for name, p in ALL:
        for action in p._actions:
            if "--framework" in action.option_strings and action.choices:
                orders.append((name, list(action.choices)))
    assert len(orders) >= 4
    reference = max((o for _, o in orders), key=len)
    for name, order in orders:
        assert [c for c in reference if c in order] == order, (name, order, reference)


def run(*argv: str) -> "subprocess.CompletedProcess[str]":
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "mlprobe", *argv], capture_output=True, text=True, env=env,
                          timeout=120, cwd=ROOT)


@pytest.mark.parametrize("argv,dest", [(["schema", "nonsense"], "which"), (["completion"], "shell"),
                                       (["capture"], "dir"), (["diff", "a.json"], "b")])
def test_usage_errors_name_no_variables(argv: List[str], dest: str) -> None:
    cp = run(*argv)
    assert cp.returncode == 2
    err = cp.stderr.splitlines()[-1]
    assert f"argument {dest}" not in err and not err.rstrip().endswith(f": {dest}"), err


def test_completion_completes_recipe_ids() -> None:
    pytest.importorskip("shtab")
    from mlprobe.recipes import load_recipes

    cp = run("completion", "bash")
    assert cp.returncode == 0, cp.stderr
    for r in load_recipes():
        assert r.id in cp.stdout, r.id
