"""The command line as a new user meets it: usage errors exit 2 with a reason, a closed pipe is a
normal end, -V, --quiet/--verbose, --json errors as JSON, diff's exit status, output that stays
copyable when piped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest

from mlprobe.errors import EXIT_USAGE

from .conftest import FIXTURES, ROOT
from .test_cli_errors import run

BUNDLE = FIXTURES / "linux-nvidia-rtx3060-smi-xml"
OTHER = FIXTURES / "linux-nvidia-h100-smi"


def sub(argv: List[str], env: "dict[str, str] | None" = None, stdin: str = "") -> Tuple[int, str, str]:
    full = dict(os.environ, **(env or {}))
    p = subprocess.run([sys.executable, "-m", "mlprobe", *argv], capture_output=True, text=True,
                       env=full, cwd=ROOT, timeout=120, errors="replace")
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("argv", [
    ["verify", "--timeout", "-5"],
    ["verify", "--timeout", "0"],
    ["verify", "--timeout", "nan"],
    ["verify", "--timeout", "inf"],
    ["install", "--timeout", "-1"],
    ["install", "--timeout", "banana"],
    ["verify", "--device", "nonsense"],
    ["verify", "--device", "cuda:x"],
])
def test_bad_values_are_usage_errors(argv: List[str]) -> None:
    rc, out, err = run(*argv)
    assert rc == EXIT_USAGE, (out, err)
    assert "error" in err and argv[1] in err


@pytest.mark.parametrize("dev", ["cpu", "cuda", "cuda:1", "rocm", "mps", "xpu", "directml", "gpu", "metal",
                                 "llvm_cpu.0", "opencl_amd_gfx1031.0", "metal_amd_radeon_pro_5600m.0"])
def test_documented_devices_are_accepted(dev: str) -> None:
    from mlprobe.commands.common import device

    assert device(dev) == dev


@pytest.mark.parametrize("argv", [
    ["plan", "--replay", str(BUNDLE)],
    ["scan", "--replay", str(BUNDLE)],
    ["scan", "--json", "--replay", str(BUNDLE)],
    ["report", "--replay", str(BUNDLE)],
    ["schema"],
])
def test_a_closed_pipe_is_a_normal_end(argv: List[str]) -> None:
    """`mlprobe plan | head -1`: exit 0, no traceback, no 'Exception ignored'."""
    p = subprocess.Popen([sys.executable, "-m", "mlprobe", *argv], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=ROOT)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read().decode(errors="replace")
    rc = p.wait(timeout=120)
    assert rc == 0, err
    assert "Traceback" not in err and "Exception ignored" not in err, err


def test_short_version_flag() -> None:
    rc, out, err = sub(["-V"])
    assert rc == 0 and out.startswith("mlprobe ")


def test_json_errors_are_json() -> None:
    rc, out, err = run("scan", "--json", "--replay", "/nonexistent/bundle")
    assert rc == EXIT_USAGE
    doc = json.loads(out)
    assert doc["error"]["ref"].startswith("E") and doc["error"]["exit_code"] == EXIT_USAGE
    assert doc["error"]["what"]
    rc, out, err = run("verify", "--json", "--timeout", "-1")
    assert rc == EXIT_USAGE and json.loads(out)["error"]["exit_code"] == EXIT_USAGE


def test_diff_exit_status_says_whether_machines_differ() -> None:
    rc, out, _ = run("diff", BUNDLE, OTHER)
    assert rc == 1 and "gpus" in out
    rc, out, _ = run("diff", BUNDLE, BUNDLE)
    assert rc == 0 and "no differences" in out
    rc, out, _ = run("diff", "--json", BUNDLE, OTHER)
    assert rc == 1 and json.loads(out)["same"] is False


def test_quiet_silences_side_remarks_and_verbose_adds_detail(tmp_path: Path) -> None:
    rc, _, err = run("report", "--replay", BUNDLE, "-o", tmp_path / "r.json")
    assert rc == 0 and "wrote" in err
    rc, _, err = run("-q", "report", "--replay", BUNDLE, "-o", tmp_path / "r2.json")
    assert rc == 0 and err == ""
    rc, _, err = run("report", "-q", "--replay", BUNDLE, "-o", tmp_path / "r3.json")
    assert rc == 0 and err == ""
    rc, _, err = run("scan", "--verbose", "--replay", BUNDLE)
    assert rc == 0 and "nvidia" in err and " s" in err  # probe timings


def test_no_progress_when_stderr_is_not_a_terminal() -> None:
    rc, out, err = sub(["scan", "--replay", str(BUNDLE)])
    assert rc == 0 and err == ""


def test_readme_documents_exit_codes() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for code in ("0", "1", "2", "3", "130"):
        assert f"| {code} |" in readme
    rc, out, _ = sub(["--help"])
    assert "exit codes" in out and "130" in out


def test_shell_completion_scripts() -> None:
    for shell in ("bash", "zsh"):
        rc, out, err = sub(["completion", shell])
        assert rc == 0, err
        assert "mlprobe" in out and "--replay" in out and "verify" in out
    rc, _, err = sub(["completion", "fish-and-chips"])
    assert rc == EXIT_USAGE


def _readme_samples() -> List[Tuple[str, str]]:
    """(command, the output the README or a page of docs/ shows for it) for every ``` block that
    starts with `$ mlprobe`."""
    import re

    pages = ["README.md"] + [f"docs/{name}.md" for name in ("scan", "plan", "install", "bundle", "verify", "doctor",
                                                              "report", "fleet", "output")]
    text = "\n".join((ROOT / p).read_text(encoding="utf-8") for p in pages)
    out = []
    for block in re.findall(r"(?m)^```[a-z]*\n(.*?)^```", text, re.S):
        lines = block.rstrip("\n").split("\n")
        if lines[0].startswith("$ mlprobe ") and len(lines) > 1:
            out.append((lines[0][2:], "\n".join(lines[1:])))
    return out


def test_readme_sample_output_is_what_mlprobe_prints() -> None:
    samples = _readme_samples()
    assert samples, "the README shows no sample output"
    for command, shown in samples:
        argv = command.split()[1:]
        rc, out, err = run(*argv)
        # doctor exits 1 when it shows something blocking: that is its answer, not a failure
        assert rc == (1 if argv[0] == "doctor" and "BLOCKING" in shown else 0), err
        assert [ln.rstrip() for ln in out.rstrip("\n").split("\n")] == \
            [ln.rstrip() for ln in shown.split("\n")], command


def test_piped_output_is_not_wrapped() -> None:
    """A long command in the plan stays on one line when the output is piped."""
    rc, out, _ = sub(["plan", "--replay", str(FIXTURES / "linux-amd-rx6700xt-gfx1031-hsa-override-rocminfo")])
    assert rc == 0
    assert any(len(ln) > 100 for ln in out.splitlines())
    cmd = [ln for ln in out.splitlines() if "--index-url https://download.pytorch.org/whl/rocm" in ln]
    assert cmd and "pip install" in cmd[0]  # the command is not cut at 80 columns
    for ln in out.splitlines():
        if "$ python -m pip install" in ln:
            assert ln.rstrip(" │").split("$ ", 1)[1].count("pip install") == 1


def test_replayed_scan_does_not_speak_of_this_python_and_counts_right(tmp_path: Path) -> None:
    rc, out, _ = run("scan", "--replay", FIXTURES / "linux-nogpu-amd-epyc-zen5-mlprobe-capture")
    assert rc == 0 and "this Python" not in out and "the captured Python" in out
    from mlprobe.ui import count

    assert count(1, "core") == "1 core" and count(2, "core") == "2 cores" and count(None, "core") == "cores unknown"


@pytest.mark.parametrize("command", ["verify", "report"])
@pytest.mark.parametrize("what,why", [
    ("folder", "it is a folder"),
    ("venv", "its interpreter is"),
    ("text", "it is not executable"),
    ("device", "it is not a regular file"),
])
def test_python_that_is_not_an_interpreter_is_a_usage_error(tmp_path: Path, command: str, what: str,
                                                            why: str) -> None:
    """`--python .venv` (the folder), a text file or /dev/null: a usage error that says what the path
    is (it was 'could not start ... Permission denied', exit 3)."""
    if os.name != "posix":
        pytest.skip("executable bits and /dev/null are POSIX")
    path: "str | Path"
    if what == "folder":
        path = tmp_path
    elif what == "venv":
        path = tmp_path / "env"
        (path / "bin").mkdir(parents=True)
        (path / "bin" / "python").write_text("", encoding="utf-8")
    elif what == "text":
        path = tmp_path / "notes.txt"
        path.write_text("hello", encoding="utf-8")
    else:
        path = "/dev/null"
    rc, out, err = run(command, "--python", path)
    assert rc == EXIT_USAGE and "[E601]" in err and why in err, err


@pytest.mark.parametrize("argv,code", [
    (["install", "--recipe-file", str(ROOT)], EXIT_USAGE),
    (["plan", "--no-such-flag"], EXIT_USAGE),
    (["scan", "--replay", "/nonexistent/bundle"], EXIT_USAGE),
])
def test_an_error_keeps_its_exit_status_when_the_reader_of_stderr_is_gone(argv: List[str], code: int) -> None:
    """`mlprobe … 2>&1 | head -1`: the error's later lines meet a closed pipe; the status stays the
    error's (it was 1, from a BrokenPipeError escaping the error handler)."""
    for _ in range(3):
        p = subprocess.Popen([sys.executable, "-m", "mlprobe", *argv], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, cwd=ROOT)
        assert p.stdout is not None
        p.stdout.readline()
        p.stdout.close()
        assert p.wait(timeout=120) == code


@pytest.mark.skipif(os.name != "posix", reason="closing a standard stream at start is POSIX shell")
@pytest.mark.parametrize("closed", ["stdout", "stderr", "both"])
@pytest.mark.parametrize("argv,code", [
    (["scan", "--replay", str(BUNDLE)], 0),
    (["report", "--replay", str(BUNDLE)], 0),
    (["install", "--recipe-file", str(ROOT)], EXIT_USAGE),
])
def test_closed_standard_streams(closed: str, argv: List[str], code: int) -> None:
    """`mlprobe scan >&-` (Python then has no sys.stdout at all): the same exit status, no traceback."""
    keep = {"stdout": (2,), "stderr": (1,), "both": ()}[closed]
    import tempfile

    with tempfile.TemporaryFile() as log:
        def close_streams() -> None:
            for fd in (1, 2):
                if fd not in keep:
                    os.close(fd)
                else:
                    os.dup2(log.fileno(), fd)

        p = subprocess.run([sys.executable, "-m", "mlprobe", *argv], cwd=ROOT, timeout=120,
                           preexec_fn=close_streams)
        log.seek(0)
        text = log.read().decode(errors="replace")
    assert p.returncode == code, text
    assert "Traceback" not in text


def test_only_the_named_commands_parser_is_built() -> None:
    """`mlprobe plan ...` builds the plan command's parser alone (the other command modules and what
    their options import stay unloaded); help, -V and unknown words get the whole parser."""
    import ast
    import subprocess
    import sys

    from mlprobe.cli import command_of

    assert command_of(["-q", "plan", "--json"]) == "plan"
    assert command_of(["--verbose", "scan"]) == "scan"
    assert command_of(["--help", "plan"]) is None and command_of(["-V"]) is None
    assert command_of(["nonsense"]) is None and command_of([]) is None
    code = ("import sys; from mlprobe import cli; p = cli.build_parser(cli.command_of(sys.argv[1:])); "
            "print(sorted(m for m in sys.modules if m.startswith('mlprobe.commands.')))")
    out = subprocess.run([sys.executable, "-c", code, "-q", "scan", "--json"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    loaded = ast.literal_eval(out.stdout.strip())
    assert "mlprobe.commands.scan" in loaded
    assert not {"mlprobe.commands.fleet", "mlprobe.commands.install", "mlprobe.commands.labels"} & set(loaded)


def test_a_one_core_machine_says_1_core_in_every_rendering(tmp_path: Path) -> None:
    """A replayed bundle of a 1-core, 1-thread machine: the scan table and the Markdown report say
    `1 core / 1 thread`, and nothing says `1 cores` or `1 threads`."""
    import re
    import shutil

    b = tmp_path / "one-core"
    shutil.copytree(FIXTURES / "linux-nogpu-amd-epyc-zen5-mlprobe-capture", b)
    first = (b / "proc-cpuinfo.txt").read_text(encoding="utf-8").split("\n\n")[0]
    first = re.sub(r"(?m)^(siblings|cpu cores)(\s*): \d+", r"\1\2: 1", first)
    (b / "proc-cpuinfo.txt").write_text(first + "\n\n", encoding="utf-8")
    lscpu = (b / "lscpu.txt").read_text(encoding="utf-8")
    lscpu = re.sub(r"(?m)^(CPU\(s\):\s+)2$", r"\g<1>1", lscpu)
    lscpu = re.sub(r"(?m)^(Core\(s\) per socket:\s+)2$", r"\g<1>1", lscpu)
    lscpu = re.sub(r"(?m)^((?:On-line|NUMA node0) CPU\(s\)(?: list)?:\s+)0,1$", r"\g<1>0", lscpu)
    (b / "lscpu.txt").write_text(lscpu, encoding="utf-8")
    rc, out, err = run("scan", "--json", "--replay", b)
    assert rc == 0 and json.loads(out)["cpu"]["cores"] == 1 and json.loads(out)["cpu"]["threads"] == 1, err
    rendered = {}
    for argv in (["scan", "--replay", b], ["report", "--format", "markdown", "--replay", b],
                 ["plan", "--replay", b]):
        rc, out, err = run(*argv)
        assert rc == 0, err
        rendered[argv[0]] = out
        assert not re.search(r"\b1 (cores|threads)\b", out), out
    assert "1 core / 1 thread" in rendered["scan"]
    assert "1 core / 1 thread" in rendered["report"]


@pytest.mark.parametrize("url", ["file:///nonexistent", "file:///nonexistent/simple/"])
def test_a_file_index_that_does_not_exist_is_not_called_http_404(tmp_path: Path, url: str) -> None:
    rc, out, err = sub(["install", "--recipe", "torch-cpu", "--index-url", url, "--apply",
                        "--venv", str(tmp_path / "env")])
    assert rc == EXIT_USAGE, err
    assert "404" not in err and "HTTP" not in err, err
    assert "[E517]" in err and "does not exist" in err
    assert not (tmp_path / "env").exists()


@pytest.mark.parametrize("command", ["doctor", "verify", "report"])
@pytest.mark.parametrize("what", ["sleep", "executable text", "a script that is no Python"])
def test_python_that_runs_but_is_not_python_is_a_usage_error(tmp_path: Path, command: str, what: str) -> None:
    """`--python /bin/sleep` passed every check of the path (a regular, executable file) and doctor went
    on with a warning, exit 0: the interpreter is started once and must answer as Python."""
    if os.name != "posix":
        pytest.skip("POSIX programs")
    path: "str | Path"
    if what == "sleep":
        path = "/bin/sleep"
    elif what == "executable text":
        path = tmp_path / "notes.txt"
        path.write_text("hello\n", encoding="utf-8")
        path.chmod(0o755)
    else:
        path = tmp_path / "python"
        path.write_text("#!/bin/sh\necho 3.12\n", encoding="utf-8")
        path.chmod(0o755)
    rc, out, err = run(command, "--python", path)
    assert rc == EXIT_USAGE and "[E601]" in err and "not a Python interpreter" in err, err
    assert "Traceback" not in err
