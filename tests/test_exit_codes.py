"""docs/exit-codes.md is the contract: every row of its per-command table has a case here that makes
the command end that way, and every case here is a row there (documented = tested)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Tuple

import pytest

from mlprobe.cli import COMMANDS, main

from .conftest import FIXTURES, ROOT

DOC = ROOT / "docs" / "exit-codes.md"
H100 = FIXTURES / "linux-nvidia-h100-smi"
H200 = FIXTURES / "linux-nvidia-h200-mlprobe-capture"
CPU = FIXTURES / "linux-nogpu-xeon-gold-6230-avx512"
S390X = FIXTURES / "linux-nogpu-s390x-z13-lpar-drawer-cpuinfo"
FLEET = FIXTURES / "fleet-linux-nvidia-h200-one-node" / "fleet.json"
BLOCKED = FIXTURES / "synthetic-linux-nvidia-h200-device-node-not-accessible"


def documented() -> List[Tuple[str, int]]:
    rows = []
    text = DOC.read_text(encoding="utf-8").split("## Per command", 1)[1]
    for line in text.splitlines():
        m = re.match(r"^\| (\w+) \| (\d+) \| ", line)
        if m:
            rows.append((m.group(1), int(m.group(2))))
    return rows


def _env(tmp: Path) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLPROBE_")}
    env["XDG_CACHE_HOME"] = str(tmp / "cache")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def sub(tmp: Path, *args: str, env: Dict[str, str] | None = None, timeout: float = 300) -> int:
    """The exit status of `mlprobe ARGS` in its own process."""
    cp = subprocess.run([sys.executable, "-m", "mlprobe", *args], capture_output=True, text=True,
                        timeout=timeout, cwd=tmp, env={**_env(tmp), **(env or {})})
    return cp.returncode


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        yield


def here(*args: str) -> int:
    """The exit status of `mlprobe ARGS` in this process (commands that never touch the machine)."""
    with _quiet():
        return main(list(args))


# ------------------------------------------------------------------------------------- cases --

def any_2(tmp: Path) -> None:
    for command in COMMANDS:
        assert here(command, "--no-such-option") == 2, command
    assert here("plan", "--framework", "nope") == 2


def any_130(tmp: Path) -> None:
    """A real Ctrl-C (SIGINT) to a capture of this machine, which takes seconds."""
    proc = subprocess.Popen([sys.executable, "-m", "mlprobe", "capture", str(tmp / "cap")], cwd=tmp,
                            env=_env(tmp), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(2.0)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err


def scan_0(tmp: Path) -> None:
    assert here("scan", "--replay", str(H100), "--json") == 0


def scan_2(tmp: Path) -> None:
    (tmp / "empty").mkdir()
    assert here("scan", "--replay", str(tmp / "empty")) == 2


def capture_0(tmp: Path) -> None:
    assert sub(tmp, "capture", str(tmp / "cap")) == 0
    assert (tmp / "cap" / "host.json").is_file()


def capture_1(tmp: Path) -> None:
    """Writes fail part-way (a file-size limit, as a full disk would): E104, exit 1."""
    import resource

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))

    cp = subprocess.run([sys.executable, "-m", "mlprobe", "capture", str(tmp / "cap")], cwd=tmp, env=_env(tmp),
                        capture_output=True, text=True, timeout=300, preexec_fn=limit)
    assert cp.returncode == 1 and "E104" in cp.stderr, cp.stderr


def capture_2(tmp: Path) -> None:
    (tmp / "full").mkdir()
    (tmp / "full" / "mine.txt").write_text("x")
    assert here("capture", str(tmp / "full")) == 2


def schema_0(tmp: Path) -> None:
    assert here("schema", "plan") == 0


def plan_0(tmp: Path) -> None:
    assert here("plan", "--replay", str(H100), "--json") == 0
    assert here("plan", "--replay", str(S390X), "--framework", "torch", "--why-not", "torch-cpu") == 0


def plan_2(tmp: Path) -> None:
    assert here("plan", "--replay", str(H100), "--python", "three") == 2
    assert here("plan", "--replay", str(H100), "--why-not", "no-such-recipe") == 2


def plan_3(tmp: Path) -> None:
    # a CPU without AVX: no TensorFlow wheel starts there (this machine, its CPU flags overridden)
    assert sub(tmp, "plan", "--framework", "tensorflow", env={"MLPROBE_OVERRIDE_CPU_FLAGS": "sse sse2"}) == 3
    # s390x: no torch wheel for it
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["plan", "--replay", str(S390X), "--framework", "torch", "--json"])
    assert code == 3 and json.loads(out.getvalue())["recommended"] == []  # the plan is printed all the same


def _wheels(tmp: Path) -> Path:
    from tests.pep503_server import build_wheel

    folder = tmp / "wheels"
    folder.mkdir(exist_ok=True)
    build_wheel(folder, "goodlib", "1.0")
    build_wheel(folder, "bad-import", "1.0", modules={"bad_import/__init__.py": "raise ImportError('planted')\n"})
    build_wheel(folder, "torch", "2.14.0+cpu")  # a stand-in torch (pure Python) for a bundle of torch-cpu
    return folder


def _recipe(tmp: Path, packages: List[str], **extra: object) -> str:
    path = tmp / f"recipe-{len(packages)}-{packages[0]}.json"
    path.write_text(json.dumps({"recipe": "demo", "title": "a demo recipe", "framework": "demo",
                                "packages": packages, **extra}))
    return str(path)


def install_0(tmp: Path) -> None:
    wheels = _wheels(tmp)
    assert sub(tmp, "install", "--recipe-file", _recipe(tmp, ["goodlib"]), "--no-index",
               "--find-links", str(wheels)) == 0
    assert sub(tmp, "install", "--recipe-file", _recipe(tmp, ["goodlib"]), "--no-index",
               "--find-links", str(wheels), "--apply", "--venv", str(tmp / "env"), "--no-verify") == 0


def install_1(tmp: Path) -> None:
    wheels = _wheels(tmp)
    assert sub(tmp, "install", "--recipe-file", _recipe(tmp, ["bad-import"], imports=["bad_import"]),
               "--no-index", "--find-links", str(wheels), "--apply", "--venv", str(tmp / "env")) == 1
    assert not (tmp / "env").exists()  # rolled back


def install_2(tmp: Path) -> None:
    (tmp / "r.json").write_text("{not json")
    assert here("install", "--recipe-file", str(tmp / "r.json")) == 2
    assert here("install", "--replay", str(H100), "--recipe", "no-such-recipe") == 2


def install_3(tmp: Path) -> None:
    assert here("install", "--replay", str(S390X), "--framework", "torch") == 3
    wheels = _wheels(tmp)  # goodlib only: the recipe's second package is on no index given
    assert sub(tmp, "install", "--recipe-file", _recipe(tmp, ["goodlib", "not-there"]), "--no-index",
               "--find-links", str(wheels)) == 3


def bundle_0(tmp: Path) -> None:
    wheels = _wheels(tmp)
    assert sub(tmp, "bundle", "--replay", str(H200), "--recipe", "torch-cpu", "-o", str(tmp / "out"),
               "--no-index", "--find-links", str(wheels)) == 0
    assert (tmp / "out" / "pylock.toml").is_file()


def bundle_2(tmp: Path) -> None:
    assert here("bundle", "--replay", str(H200), "-o", str(tmp / "out")) == 2
    assert here("bundle", "--replay", str(H100), "--recipe", "torch-cuda", "-o", str(tmp / "out2"),
                "--reuse-installed") == 2  # a capture without the package list


def bundle_3(tmp: Path) -> None:
    (tmp / "none").mkdir()
    assert sub(tmp, "bundle", "--replay", str(H200), "--recipe", "plaidml-keras", "-o", str(tmp / "out"),
               "--no-index", "--find-links", str(tmp / "none")) == 3


def verify_0(tmp: Path) -> None:
    assert sub(tmp, "verify", "--framework", "torch", "--device", "cpu", "--quick", "--no-cpu-peers") == 0


def verify_1(tmp: Path) -> None:
    # a device this machine does not have: torch runs, and does not see it
    assert sub(tmp, "verify", "--framework", "torch", "--device", "cuda", "--quick", "--no-cpu-peers") == 1


def verify_3(tmp: Path) -> None:
    venv = tmp / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    assert sub(tmp, "verify", "--framework", "torch", "--python", str(venv / "bin" / "python"), "--quick",
               "--no-cpu-peers") == 3


def doctor_0(tmp: Path) -> None:
    assert here("doctor", "--replay", str(FIXTURES / "linux-nvidia-h200-doctor-capture")) == 0


def doctor_1(tmp: Path) -> None:
    assert here("doctor", "--replay", str(BLOCKED)) == 1


def doctor_2(tmp: Path) -> None:
    assert here("doctor", "--replay", str(H200), "--python", sys.executable) == 2


def report_0(tmp: Path) -> None:
    assert here("report", "--replay", str(H100), "-o", str(tmp / "r.json")) == 0


def report_2(tmp: Path) -> None:
    assert here("report", "--replay", str(H100), "-o", str(tmp / "no" / "such" / "r.json")) == 2


def diff_0(tmp: Path) -> None:
    assert here("diff", str(H100), str(H100)) == 0


def diff_1(tmp: Path) -> None:
    assert here("diff", str(H100), str(H200)) == 1


def diff_2(tmp: Path) -> None:
    (tmp / "x.json").write_text("[]")
    assert here("diff", str(H100), str(tmp / "x.json")) == 2


def fleet_0(tmp: Path) -> None:
    assert here("fleet", "show", str(FLEET)) == 0
    shutil.copy(FLEET, tmp / "f.json")
    assert here("fleet", "show", str(tmp / "f.json"), "--json") == 0


def fleet_1(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`fleet scan` of a cluster where one node did not answer (the cluster's answer stood in for by
    the real one-node fleet document with that node marked failed)."""
    import mlprobe.fleet.ray_scan as ray_scan
    from mlprobe.fleet.document import FleetDocument

    doc = json.loads(FLEET.read_text(encoding="utf-8"))
    doc["nodes"][0]["status"] = "timeout"
    fleet = FleetDocument.from_json(doc)
    monkeypatch.setattr(ray_scan, "scan_fleet", lambda *a, **k: fleet)
    assert here("fleet", "scan", "-o", str(tmp / "f.json")) == 1


def fleet_2(tmp: Path) -> None:
    assert here("fleet") == 2
    (tmp / "x.json").write_text('{"hello": 1}')
    assert here("fleet", "show", str(tmp / "x.json")) == 2


def labels_0(tmp: Path) -> None:
    assert here("labels", "--replay", str(H100)) == 0


def labels_2(tmp: Path) -> None:
    assert here("labels", "--replay", str(H100), "--prefix", "not a namespace!") == 2


def export_0(tmp: Path) -> None:
    assert here("export", "--to", "uv", "--replay", str(H100), "--framework", "torch") == 0


def export_2(tmp: Path) -> None:
    assert here("export", "--to", "nope", "--replay", str(H100), "--framework", "torch") == 2
    assert here("export", "--to", "pixi", "--fleet", str(FLEET)) == 2


def completion_0(tmp: Path) -> None:
    pytest.importorskip("shtab")
    assert here("completion", "bash") == 0


def completion_3(tmp: Path) -> None:
    code = ("import sys; sys.modules['shtab'] = None\n"
            "from mlprobe.cli import main; sys.exit(main(['completion', 'bash']))")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=_env(tmp))
    assert cp.returncode == 3 and "E003" in cp.stderr, cp.stderr


CASES: Dict[str, Callable[..., None]] = {
    name: fn for name, fn in globals().items()
    if callable(fn) and re.fullmatch(r"[a-z]+_\d+", name)
}


def test_every_row_has_a_case_and_every_case_a_row() -> None:
    rows = {f"{c}_{n}" for c, n in documented()}
    assert len(rows) == len(documented()), "a row is listed twice"
    assert rows == set(CASES), f"rows without a case: {rows - set(CASES)}; cases without a row: {set(CASES) - rows}"


def test_every_command_has_rows() -> None:
    commands = {c for c, _ in documented()}
    assert set(COMMANDS) <= commands, set(COMMANDS) - commands


@pytest.mark.parametrize("row", sorted(CASES))
def test_row(row: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fn = CASES[row]
    if fn.__code__.co_argcount == 2:
        fn(tmp_path, monkeypatch)
    else:
        fn(tmp_path)
