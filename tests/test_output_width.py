"""How wide mlprobe's output is, as a person sees it: real commands on real captures (`--replay`),
through a pipe and on a real 80-column pseudo-terminal.

The contract: through a pipe no line is wider than 100 columns, on an 80-column terminal none is wider
than 80, unless the part that does not fit is a printed command, a URL or a path, which is never
broken (a command stays one line that can be copied); a line that is continued is indented; a
recipe's title is never cut; tables keep their headers readable; rich's highlighter colours nothing
that mlprobe did not style itself."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest

from .conftest import FIXTURES, ROOT

PIPE_WIDTH, TERMINAL_WIDTH = 100, 80

CASES = {
    "xeon": FIXTURES / "linux-nogpu-xeon-gold-6230-avx512",
    "h200": FIXTURES / "linux-nvidia-h200-mlprobe-capture",
    "windows": FIXTURES / "windows-nvidia-rtx3090-dxdiag",
    "mac": FIXTURES / "darwin-apple-m1-pro-system-profiler",
    "amd": FIXTURES / "linux-amd-rx6700xt-gfx1031-hsa-override-rocminfo",
    "noavx": FIXTURES / "linux-nogpu-amd-opteron-8354-no-avx",
}
FLEET = FIXTURES / "fleet-linux-nvidia-h200-one-node" / "fleet.json"
VERIFY = sorted(FIXTURES.glob("verify-*/result.json"))


def commands() -> List[Tuple[str, List[str]]]:
    out: List[Tuple[str, List[str]]] = []
    for name, folder in CASES.items():
        for cmd in (["scan"], ["plan"], ["install"], ["doctor"]):
            out.append((f"{cmd[0]}-{name}", [*cmd, "--replay", str(folder)]))
    out.append(("plan-tensorflow-noavx", ["plan", "--framework", "tensorflow", "--replay", str(CASES["noavx"])]))
    out.append(("why-not", ["plan", "--why-not", "torch-cuda", "--replay", str(CASES["xeon"])]))
    out.append(("diff", ["diff", str(CASES["xeon"]), str(CASES["h200"])]))
    out.append(("fleet-show", ["fleet", "show", str(FLEET)]))
    return out


COMMANDS = commands()
IDS = [c[0] for c in COMMANDS]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
_BOX = " │┃║╭╮╰╯─━┌┐└┘├┤┬┴┼╇╈┡┩┏┓┗┛┣┫┳┻╋"


def _env(**extra: str) -> "dict[str, str]":
    env = dict(os.environ, PYTHONPATH=str(ROOT), **extra)
    for k in ("COLUMNS", "LINES", "MLPROBE_REPLAY", "NO_COLOR", "FORCE_COLOR"):
        env.pop(k, None) if k not in extra else None
    return env


def through_a_pipe(argv: List[str]) -> Tuple[str, str]:
    proc = subprocess.run([sys.executable, "-m", "mlprobe", *argv], stdin=subprocess.DEVNULL,
                          capture_output=True, env=_env(TERM="xterm-256color"), cwd=ROOT, timeout=240)
    assert proc.returncode in (0, 1, 3), proc.stderr.decode("utf-8", "replace")
    return proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")


def on_a_terminal(argv: List[str], columns: int = TERMINAL_WIDTH) -> str:
    """stdout and stderr on one real pseudo-terminal of `columns` columns (its size set with
    TIOCSWINSZ, as a terminal emulator does, and COLUMNS as a shell exports it)."""
    import fcntl
    import pty
    import struct
    import termios

    from .ptyio import drain

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                            env=_env(TERM="xterm-256color", COLUMNS=str(columns)), cwd=ROOT)
    os.close(slave)
    try:
        seen = drain(master, proc, 240)
        assert proc.wait(timeout=30) in (0, 1, 3), seen.decode("utf-8", "replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return as_shown(seen.decode("utf-8", "replace"))


def as_shown(raw: str) -> str:
    """The terminal's lines as they stay on the screen: a carriage return (a progress line redrawn)
    starts its line again, colours and cursor codes show nothing."""
    lines = []
    for line in raw.replace("\r\n", "\n").split("\n"):
        lines.append(_ANSI.sub("", line.split("\r")[-1]))
    return "\n".join(lines)


# a table cell or header cut by rich ("fram…", "580.159.…")
CUT = r"\w…(?=[\s│┃]|$)"


def _tokens(line: str) -> List[str]:
    return re.findall(r"`[^`]*`\S*|\S+", line)


def allowed_long(line: str) -> bool:
    """A line that may be wider than the limit: a printed command (`$ …`), or one whose overflow is
    a single URL, path or quoted command that must not be broken."""
    body = line.strip(_BOX)
    if body.startswith("$ "):
        return True
    tokens = _tokens(body)
    if not tokens:
        return False
    longest = max(tokens, key=len)
    data_like = longest.startswith("`") or "/" in longest or "\\" in longest
    return data_like and len(line) - len(longest) <= PIPE_WIDTH


def too_wide(text: str, limit: int) -> List[str]:
    return [ln for ln in text.splitlines() if len(ln) > limit and not allowed_long(ln)]


def unindented_continuations(text: str) -> List[str]:
    """A sentence broken mid-line without indentation: a long line at column 0 that does not end a
    sentence, followed by a line at column 0 that starts with a lower-case word (not a label)."""
    lines = text.splitlines()
    bad = []
    for prev, ln in zip(lines, lines[1:]):
        if (len(prev) >= TERMINAL_WIDTH - 12 and prev[:1].strip() and ln[:1].islower()
                and not prev.rstrip().endswith((".", ")", ":", ";", "!"))
                and ":" not in ln.split(" ", 1)[0]
                and "  " not in prev.strip()  # a plain-text table's columns are two blanks apart
                and not set(prev) & set(_BOX[1:])):  # nor is a table's border
            bad.append(f"{prev}\n{ln}")
    return bad


@pytest.mark.parametrize("name,argv", COMMANDS, ids=IDS)
def test_through_a_pipe_no_line_is_wider_than_100_columns(name: str, argv: List[str]) -> None:
    out, err = through_a_pipe(argv)
    assert out.strip(), err
    assert "\x1b[" not in out, "colours in a pipe"
    # an error's parts stay one line each in a pipe (docs/output.md): a log reader greps them
    err = "\n".join(ln for ln in err.splitlines() if not re.match(r"error \[E\d+\]:|  (why|next): ", ln))
    wide = too_wide(out, PIPE_WIDTH) + too_wide(err, PIPE_WIDTH)
    assert not wide, "\n".join(wide)


@pytest.mark.skipif(not hasattr(os, "openpty") or sys.platform == "darwin", reason="needs a pseudo-terminal")
@pytest.mark.parametrize("name,argv", COMMANDS, ids=IDS)
def test_on_an_80_column_terminal_no_line_is_wider_and_nothing_breaks_mid_line(name: str, argv: List[str]) -> None:
    seen = on_a_terminal([sys.executable, "-m", "mlprobe", *argv])
    assert seen.strip()
    wide = too_wide(seen, TERMINAL_WIDTH)
    assert not wide, "\n".join(wide)
    assert not unindented_continuations(seen), "\n\n".join(unindented_continuations(seen))
    # a table that collapses shows its headers cut ("fram…", "dev…")
    assert not re.search(CUT, seen), seen


def _plan_commands(text: str) -> List[str]:
    return [ln.strip(_BOX).strip()[2:] for ln in text.splitlines() if ln.strip(_BOX).strip().startswith("$ ")]


@pytest.mark.skipif(not hasattr(os, "openpty") or sys.platform == "darwin", reason="needs a pseudo-terminal")
@pytest.mark.parametrize("case", ["xeon", "h200", "windows"])
def test_printed_commands_are_the_plans_commands_whole_on_any_width(case: str) -> None:
    """Each command of the plan appears as one line (the terminal may fold it; nothing is inserted
    into it), at 80 columns as in a pipe."""
    argv = ["plan", "--replay", str(CASES[case])]
    doc = json.loads(subprocess.run([sys.executable, "-m", "mlprobe", *argv, "--json"], capture_output=True,
                                    env=_env(), cwd=ROOT, timeout=240).stdout)
    expected = [c for e in doc["recommended"] for c in e["commands"]]
    assert expected
    piped, _ = through_a_pipe(argv)
    assert _plan_commands(piped) == expected
    # on the terminal a long command is folded by the terminal itself, not by mlprobe: joined back
    # at the width, the command is whole
    seen = on_a_terminal([sys.executable, "-m", "mlprobe", *argv])
    joined = _unfold(seen, TERMINAL_WIDTH)
    assert _plan_commands(joined) == expected


def _unfold(text: str, width: int) -> str:
    out: List[str] = []
    for ln in text.split("\n"):
        if out and len(out[-1]) % width == 0 and out[-1] and out[-1].lstrip().startswith("$ "):
            out[-1] += ln
        else:
            out.append(ln)
    return "\n".join(out)


@pytest.mark.skipif(not hasattr(os, "openpty") or sys.platform == "darwin", reason="needs a pseudo-terminal")
def test_recipe_titles_are_whole_and_every_recipe_is_drawn_alike() -> None:
    argv = ["plan", "--replay", str(CASES["xeon"])]
    doc = json.loads(subprocess.run([sys.executable, "-m", "mlprobe", *argv, "--json"], capture_output=True,
                                    env=_env(), cwd=ROOT, timeout=240).stdout)
    seen = on_a_terminal([sys.executable, "-m", "mlprobe", *argv])
    flat = " ".join(seen.split())
    for i, e in enumerate(doc["recommended"], 1):
        assert f"{i}. {e['recipe']} {e['title']}" in flat
    assert not re.search("[╭╰┌└]", seen.split("Does not fit")[0]), "some recipes boxed, others not"


@pytest.mark.skipif(not hasattr(os, "openpty") or sys.platform == "darwin", reason="needs a pseudo-terminal")
def test_no_colour_mlprobe_did_not_ask_for() -> None:
    """rich's highlighter would colour numbers, "Intel", "Xeon" and brackets of the CPU's name."""
    import pty  # noqa: F401  (skip reason above)

    master_seen = on_a_terminal([sys.executable, "-m", "mlprobe", "scan", "--replay", str(CASES["xeon"])])
    assert "Xeon" in master_seen
    raw = _raw_terminal(["scan", "--replay", str(CASES["xeon"])])
    m = re.search(r"[^\n]*Xeon[^\n]*", raw)
    assert m and "Xeon" in _ANSI.sub("", m.group(0))
    assert not re.search(r"\x1b\[[0-9;]*m(Xeon|Intel)", raw), m.group(0)


def _raw_terminal(argv: List[str]) -> str:
    import pty

    from .ptyio import drain

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "mlprobe", *argv], stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=slave, env=_env(TERM="xterm-256color", COLUMNS="80"), cwd=ROOT)
    os.close(slave)
    try:
        seen = drain(master, proc, 240)
        proc.wait(timeout=30)
    finally:
        os.close(master)
    return seen.decode("utf-8", "replace")


@pytest.mark.skipif(not hasattr(os, "openpty") or sys.platform == "darwin", reason="needs a pseudo-terminal")
@pytest.mark.parametrize("path", VERIFY, ids=[p.parent.name for p in VERIFY])
def test_verify_results_fit_80_columns_and_their_table_keeps_its_headers(path: Path) -> None:
    code = ("import json, sys; from mlprobe.render.verify_terminal import render_verify; "
            "render_verify(json.load(open(sys.argv[1], encoding='utf-8')))")
    seen = on_a_terminal([sys.executable, "-c", code, str(path)])
    assert not too_wide(seen, TERMINAL_WIDTH), "\n".join(too_wide(seen, TERMINAL_WIDTH))
    assert not re.search(CUT, seen), seen
    for header in ("framework", "device", "verdict"):
        assert header in seen
    piped = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, env=_env(), cwd=ROOT,
                           timeout=120).stdout.decode()
    assert not too_wide(piped, PIPE_WIDTH), "\n".join(too_wide(piped, PIPE_WIDTH))
