"""Which stream each thing goes to, per command: the answer on stdout; errors on stderr (the same
error on the same stream whatever the flags); progress on stderr only when stderr is a terminal, so
`2>file` or a pipe gets no progress lines; side remarks (where a file went) on stderr."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from .conftest import FIXTURES, ROOT

BUNDLE = FIXTURES / "linux-nvidia-h200-mlprobe-capture"
FLEET = FIXTURES / "fleet-linux-nvidia-h200-one-node" / "fleet.json"

# what progress looks like: a redrawn line, a spinner, a step counter or "... step" log lines
PROGRESS = re.compile(r"\r|\x1b\[2K|[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]|^\.\.\. |\(\d+ s\)", re.M)


def run(argv: List[str], tmp: Path) -> "subprocess.CompletedProcess[str]":
    env = dict(os.environ, PYTHONPATH=str(ROOT), TERM="xterm-256color", XDG_CACHE_HOME=str(tmp / "cache"))
    env.pop("MLPROBE_REPLAY", None)
    with open(tmp / "stderr.txt", "w", encoding="utf-8") as err:  # `2>file`
        cp = subprocess.run([sys.executable, "-m", "mlprobe", *argv], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=tmp, timeout=300)
    cp.stderr = (tmp / "stderr.txt").read_text(encoding="utf-8")
    return cp


# (command, what must be on stdout, what stderr may hold: None = nothing at all)
CASES = [
    (["scan", "--replay", str(BUNDLE)], "mlprobe scan", None),
    (["scan", "--replay", str(BUNDLE), "--json"], "{", None),
    (["plan", "--replay", str(BUNDLE)], "Best fit", None),
    (["plan", "--replay", str(BUNDLE), "--json"], "{", None),
    (["doctor", "--replay", str(BUNDLE)], "mlprobe doctor", None),
    # no wheels in the folder: the steps on stdout, the error (E514) on stderr and nothing else
    (["install", "--replay", str(BUNDLE), "--recipe", "torch-cuda", "--no-index", "--find-links", "."],
     "Steps", "error ["),
    (["report", "--replay", str(BUNDLE), "-o", "r.json"], "", "wrote"),
    (["report", "--replay", str(BUNDLE), "--format", "markdown"], "mlprobe", None),
    (["diff", str(BUNDLE), str(FIXTURES / "linux-nogpu-xeon-gold-6230-avx512")], "A = ", None),
    (["fleet", "show", str(FLEET)], "mlprobe fleet", None),
    (["labels", "--replay", str(BUNDLE)], "mlprobe.feature", None),
    (["schema", "plan"], "{", None),
    (["export", "--to", "conda", "--replay", str(BUNDLE)], "CONDA_SUBDIR=", "environment.yml"),
    (["capture", "cap"], "wrote", "NOT redacted"),
    (["bundle", "--replay", str(BUNDLE), "--recipe", "plaidml-keras", "--no-index", "--find-links", ".", "-o",
      "b"], "", "error ["),
    (["completion", "bash"], "mlprobe", None),
]


@pytest.mark.parametrize("argv,stdout_has,stderr_has", CASES, ids=[" ".join(c[0][:2]) for c in CASES])
def test_answer_on_stdout_and_no_progress_in_a_stderr_file(tmp_path: Path, argv: List[str], stdout_has: str,
                                                           stderr_has: "str | None") -> None:
    cp = run(argv, tmp_path)
    assert cp.returncode in (0, 1, 3), cp.stderr
    assert stdout_has in cp.stdout, cp.stdout[:2000]
    assert not PROGRESS.search(cp.stderr), cp.stderr
    if stderr_has is None:
        assert cp.stderr == "", cp.stderr
    elif stderr_has == "error [":
        assert all(re.match(r"error \[E\d+\]: |  (why|next): ", ln) for ln in cp.stderr.splitlines()), cp.stderr
        assert "error [" not in cp.stdout
    else:
        assert stderr_has in cp.stderr and "error [" not in cp.stderr, cp.stderr
    if argv[-1] == "--json" or argv[0] == "schema":
        json.loads(cp.stdout)


def test_an_error_goes_to_stderr_only(tmp_path: Path) -> None:
    cp = run(["plan", "--replay", str(tmp_path / "missing")], tmp_path)
    assert cp.returncode == 2 and "error [E101]" in cp.stderr and cp.stdout == ""


def test_an_index_that_does_not_answer_is_the_same_error_on_the_same_stream_with_and_without_apply(
        tmp_path: Path) -> None:
    """E501 (nothing listens on the index's port): with and without --apply on stderr, never on
    stdout, with the same words and exit status; without --apply stdout still shows the steps."""
    rec = tmp_path / "recipe.json"
    rec.write_text(json.dumps({"recipe": "demo", "title": "a demo recipe", "framework": "demo",
                               "packages": ["demo-app"]}))
    seen = []
    for extra in ([], ["--apply", "--venv", str(tmp_path / "venv")]):
        cp = run(["install", "--recipe-file", str(rec), "--index-url", "http://127.0.0.1:9/simple", *extra],
                 tmp_path)
        assert cp.returncode == 3, (cp.stdout, cp.stderr)
        assert "E501" not in cp.stdout and "problem [" not in cp.stdout, cp.stdout
        errors = [ln for ln in cp.stderr.splitlines() if ln.startswith("error [E501]")]
        assert errors, cp.stderr
        assert not PROGRESS.search(cp.stderr), cp.stderr
        seen.append(errors[0])
        if not extra:
            assert "Steps" in cp.stdout
    assert seen[0] == seen[1]
    assert not (tmp_path / "venv").exists()
