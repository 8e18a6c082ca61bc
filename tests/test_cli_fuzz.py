"""The command line under fuzzing: argument vectors (every subcommand, its flags, nonsense values,
paths to odd files, replay bundles including hostile ones; reports and fleet reports with hostile dict
keys, numbers no document holds and markup in facts) and environment values (MLPROBE_OVERRIDE_*,
PYTHONIOENCODING, MLPROBE_PYTORCH_INDEX_URL, COLUMNS, NO_COLOR, TERM). Whatever comes in: no
traceback, and an exit status of 0, 1, 2, 3 or 130 only; with --json, stdout is one JSON document;
nothing from the data reaches the terminal as an escape sequence or a hyperlink.

Most examples run in this process (main(argv) with captured streams, the streams' encoding standing
in for PYTHONIOENCODING); a few run as real subprocesses. Nothing here reaches the network or changes
an environment: installs point at a closed port, verify runs only fake interpreters."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlprobe import cli

from .conftest import FIXTURES, ROOT
from .fuzz import examples

EXIT_CODES = {0, 1, 2, 3, 130}
DEAD_INDEX = "http://127.0.0.1:9/simple/"  # nothing listens on the discard port

GOOD = [FIXTURES / n for n in ("linux-nvidia-h100-smi", "linux-amd-rx6700xt-gfx1031-hsa-override-rocminfo",
                               "linux-nogpu-amd-epyc-zen5-mlprobe-capture", "darwin-apple-m4-max-sysctl",
                               "synthetic-windows-secrets", "linux-nvidia-h100-torch-collect-env")]

# Dict keys and facts that are markup or escapes for a terminal, Markdown or HTML.
HOSTILE_TEXT = ["\x1b[2J\x1b[31mred", "[/bogus]", "[link=https://evil.example/]k[/link]",
                "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\", "![x](https://evil.example/p.png)",
                "\u202e(1/2)", "a\nb\rc", "trailing\\", "<img src=x>", "x' $(touch pwned) `touch pwned`"]
# Numbers no document holds, as they appear in a file.
HUGE_NUMBERS = ["1e999", "-1e999", "1" * 5000, "1" + "0" * 400, "NaN", "Infinity", "-Infinity", str(2 ** 64)]
MARKUP_GPU = "NVIDIA H100 [/x] [link=https://evil.example/]y[/link] ![i](https://evil.example/p.png) \u202e"

NONSENSE = ["", " ", "-1", "0", "nan", "inf", "1e309", "1e300", "-0", "banana", "3.", "99.99", "\u00e9\u00e8",
            "\x1b[31mred", "a\nb", "--", "-", "x" * 5000, "../../etc/passwd", "\u202etxt.exe", "%s%n",
            "{}", "[]", "null"]


def _write(path: Path, data: "str | bytes") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


class Arena:
    """Every odd thing an argument can point at, made once per module."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.count = 0
        posix = os.name == "posix"
        b = base / "bundles"
        good = shutil.copytree(GOOD[0], b / "good")
        hostile: Dict[str, Path] = {}

        def bundle(name: str, files: Dict[str, "str | bytes"], like: Optional[Path] = GOOD[0]) -> Path:
            folder = b / name
            if like is not None:
                shutil.copytree(like, folder)
            else:
                folder.mkdir(parents=True)
            for fname, data in files.items():
                target = folder / fname
                if target.exists():
                    target.unlink()
                _write(target, data)
            hostile[name] = folder
            return folder

        if posix:
            f = bundle("symlinks", {})
            for name, to in (("lspci.txt", "/etc/passwd"), ("nvidia-smi-q-x.xml", "/dev/zero"),
                             ("proc-cpuinfo.txt", "loop-b"), ("loop-b", "proc-cpuinfo.txt")):
                if (f / name).exists() or (f / name).is_symlink():
                    (f / name).unlink()
                (f / name).symlink_to(to)
            f = bundle("fifo", {}, like=GOOD[2])
            os.mkfifo(f / "nvidia-smi-q-x.xml")
            odd = os.path.join(os.fsencode(b), b"odd-\xff\xfe-name")
            if sys.platform != "darwin":
                shutil.copytree(os.fsencode(GOOD[1]), odd)
                hostile["non-utf8"] = Path(os.fsdecode(odd))
        bundle("ansi", {"lspci.txt": "01:00.0 VGA compatible controller [0300]: NVIDIA \x1b[31mEVIL\x1b]0;t\x07 "
                                     "[10de:2330]\r\n\x00\x9b2J\n",
                        "os-release.txt": 'PRETTY_NAME="\x1b[2J\x1b[H pwned"\n'}, like=GOOD[0])
        bundle("huge-lspci", {"lspci.txt": "".join(
            f"{i // 256:02x}:{i % 256 // 8:02x}.{i % 8} 3D controller [0302]: NVIDIA Corporation GH100 "
            f"[H100 SXM5 80GB] [10de:2330] (rev a1)\n" for i in range(6000))}, like=None)
        bundle("garbage", {n: bytes(range(256)) * 40 for n in (
            "lspci.txt", "nvidia-smi-q-x.xml", "rocminfo.txt", "clinfo.json", "proc-cpuinfo.txt", "lscpu.txt",
            "sysctl.txt", "os-release.txt", "collect_env.txt", "mlprobe-frameworks.json", "ls-l-dev.txt", "id.txt",
            "ldconfig-p.txt", "opencl-icd.json", "framework-devices.json", "proc-1-cgroup.txt", "dockerenv.txt")},
               like=None)
        # what doctor reads, in the wrong shapes: JSON of other types, an ls line per odd mode, a huge cache
        bundle("doctor-odd", {
            "framework-devices.json": json.dumps({"frameworks": [{"name": "torch", "info": {"cuda": 13, "arch_list": "x"},
                                                                  "devices": [{"id": None, "kind": ["cuda"]}, 5],
                                                                  "unavailable": [{"reason": ["no"]}]}, "jax", None]}),
            "opencl-icd.json": json.dumps({"loader": [{"name": "libOpenCL.so", "path": 7}, None],
                                           "icd_files": [{"file": None, "library": "x", "error": {"a": 1}}]}),
            "ls-l-dev.txt": "/dev:\ncrw-rw----+ 1 root \x1b[31mrender 1, 2 Jan  1 00:00 kfd\n"
                            "c????????? ? ? ? ? ? nvidia0\n" + "crw-rw-rw- 1 a b 1, 1 Jan 1 00:00 nvidia%d\n" * 300,
            "id.txt": "uid=abc(x) groups=,,,(\n",
            "ldconfig-p.txt": "\tlibcuda.so.1 (libc6) => \n" * 5000,
            "host.json": json.dumps({"system": "Linux", "env": {"CUDA_VISIBLE_DEVICES": "-1,\x00", "LD_LIBRARY_PATH": "::::",
                                                                "HSA_OVERRIDE_GFX_VERSION": "99.99.99",
                                                                "KUBERNETES_SERVICE_HOST": "\x1b[2J"}}),
            "dockerenv.txt": "",
        }, like=GOOD[0])
        bundle("overrides-bad", {"host.json": json.dumps({"system": "Linux", "env": {
            "MLPROBE_OVERRIDE_PYTHON_VERSION": "banana", "MLPROBE_OVERRIDE_CPU_FLAGS": "\x1b[31m avx"}})})
        bundle("overrides-ok", {"host.json": json.dumps({"system": "Linux", "machine": "x86_64", "env": {
            "MLPROBE_OVERRIDE_PYTHON_VERSION": "3.8", "MLPROBE_OVERRIDE_CPU_FLAGS": "sse sse2"}})})
        bundle("host-wrong-types", {"host.json": json.dumps({"system": 5, "machine": ["x"], "env": [1, 2],
                                                             "python": {"version": 3.1}, "release": None})})
        bundle("host-deep", {"host.json": "[" * 50_000})
        bundle("empty-files", {n: "" for n in ("lspci.txt", "host.json", "nvidia-smi-q-x.xml")}, like=None)
        bundle("markup-gpu", {n: (GOOD[0] / n).read_text(encoding="utf-8").replace("NVIDIA H100", MARKUP_GPU)
                              for n in ("nvidia-smi.txt", "nvidia-smi-q.txt")})
        bundle("host-numbers", {"host.json": '{"system": "Linux", "machine": "x86_64", "python_version": 1e999}'})
        (b / "empty-folder").mkdir()
        hostile["empty-folder"] = b / "empty-folder"

        r = base / "reports"
        reports = {
            "v99": _write(r / "v99.json", json.dumps({"report_version": "99.0", "scan": {}})),
            "flags-dict": _write(r / "flags-dict.json", json.dumps(
                {"report_version": "1.0", "scan": {"report_version": "1.0", "cpu": {"flags": {"avx": 1}},
                                                   "gpus": "many"}})),
            "truncated": _write(r / "truncated.json", '{"report_version": "1.0", "scan": {"cpu": {"fl'),
            "binary": _write(r / "binary.json", bytes(range(256)) * 10),
            "empty": _write(r / "empty.json", b""),
            "deep": _write(r / "deep.json", "[" * 100_000),
            "bundle-paths": _write(r / "bundle-paths.json", json.dumps({
                "report_version": "1.0", "capture_bundle": {"files": {
                    "../../etc/passwd": {"text": "root:x:0:0"}, "lspci.txt": {"base64": "!!notbase64"},
                    "host.json": {"text": "{\"system\": \"Linux\"}"}, "proc-cpuinfo.txt": {"text": 5},
                    "nvidia-smi-q-x.xml": "plain string"}}})),
            "bundle-list": _write(r / "bundle-list.json", json.dumps(
                {"report_version": "1.0", "capture_bundle": {"files": ["lspci.txt"]}})),
            "bundle-good-b64": _write(r / "bundle-good-b64.json", json.dumps({
                "report_version": "1.0", "capture_bundle": {"files": {
                    "lspci.txt": {"base64": base64.b64encode(
                        (GOOD[0] / "lspci.txt").read_bytes() if (GOOD[0] / "lspci.txt").exists()
                        else b"01:00.0 VGA [0300]: NVIDIA [10de:2330]\n").decode()},
                    "host.json": {"text": json.dumps({"system": "Linux"})}}}})),
        }
        # A real report with its bundle, and the scan JSON of a fixture (for diff).
        with capture_streams("utf-8") as (out, _err):
            cli.main(["report", "--include-raw", "--replay", str(GOOD[2]), "-o", str(r / "real.json")])
            cli.main(["scan", "--json", "--replay", str(GOOD[1])])
        reports["real"] = r / "real.json"
        reports["scan-json"] = _write(r / "scan.json", out.getvalue().decode("utf-8"))
        # hostile keys and markup in facts, and numbers no document holds, in real reports
        real = json.loads((r / "real.json").read_text(encoding="utf-8"))
        keyed = json.loads(json.dumps(real))
        plan = keyed.get("plan") if isinstance(keyed.get("plan"), dict) else {}
        if isinstance(plan.get("top"), dict):
            plan["top"].update({k: None for k in HOSTILE_TEXT})
        for rec in plan.get("recommended") or []:
            if isinstance(rec, dict):
                rec["env"] = {k: k for k in HOSTILE_TEXT}
        keyed["scan"]["frameworks"] = list(keyed["scan"].get("frameworks") or []) + [
            {"name": t, "version": t} for t in HOSTILE_TEXT]
        keyed["scan"]["cpu"]["model"] = " ".join(HOSTILE_TEXT)
        reports["hostile-keys"] = _write(r / "hostile-keys.json", json.dumps(keyed))
        for i, literal in enumerate(HUGE_NUMBERS):
            doc = json.loads(json.dumps(real))
            doc["scan"]["cpu"]["threads"] = "@@N@@"
            reports[f"number-{i}"] = _write(r / f"number-{i}.json", json.dumps(doc).replace('"@@N@@"', literal))
        from mlprobe.fleet.merge import merge_reports

        fleets = base / "fleets"
        fleet = merge_reports([str(reports["real"]), str(reports["hostile-keys"])])
        fleet["summary"]["by_status"].update({k: 1 for k in HOSTILE_TEXT})
        self.fleets = {"hostile-keys": str(_write(fleets / "keys.json", json.dumps(fleet)))}
        for i, literal in enumerate(HUGE_NUMBERS[:4]):
            f = json.loads(json.dumps(fleet))
            f["nodes"][0]["seconds"] = "@@N@@"
            self.fleets[f"number-{i}"] = str(_write(fleets / f"number-{i}.json",
                                                    json.dumps(f).replace('"@@N@@"', literal)))
        self.report_folder = str(r)

        o = base / "odd"
        odd_files: Dict[str, str] = {
            "missing": str(o / "does-not-exist"),
            "folder": str(_write(o / "folder" / "x", "x").parent),
            "text": str(_write(o / "text.txt", "hello\n")),
            "newline-name": str(_write(o / "new\nline\x1b[31m.json", "{}")),
        }
        if posix:
            os.mkfifo(o / "fifo")
            odd_files["fifo"] = str(o / "fifo")
            odd_files["dev-null"] = "/dev/null"
            odd_files["dev-zero"] = "/dev/zero"
            (o / "loop").symlink_to(o / "loop")
            odd_files["loop"] = str(o / "loop")
            (o / "dangling").symlink_to(o / "nowhere")
            odd_files["dangling"] = str(o / "dangling")
        self.good = [str(good), *map(str, GOOD)]
        self.hostile = {k: str(v) for k, v in hostile.items()}
        self.reports = {k: str(v) for k, v in reports.items()}
        self.odd = odd_files
        self.pythons = self._fake_pythons(base / "py") if posix else {}
        self.pythons.update({k: v for k, v in odd_files.items() if k in ("missing", "folder", "text", "dev-null")})
        self.recipes = {
            "list": str(_write(r / "recipe-list.json", "[1, 2]")),
            "no-packages": str(_write(r / "recipe-empty.json", "{}")),
            "weird": str(_write(r / "recipe-weird.json", json.dumps({
                "recipe": "\x1b[31mx", "packages": ["torch", 5, None, "--index-url=file:///etc"],
                "index": 7, "env": {"A": ["b"]}, "commands": "rm -rf /"}))),
            "plan-no-recommended": str(_write(r / "plan.json", json.dumps({"recommended": "yes"}))),
        }

    @staticmethod
    def _fake_pythons(folder: Path) -> Dict[str, str]:
        """Interpreters that are not: garbage output, a crash, a hostile verify protocol."""
        folder.mkdir()
        mark = "@@mlprobe-verify@@ "
        hostile_events = [
            {"event": "discover", "python": "3.11.0", "frameworks": {
                "torch": {"importable": True, "version": "\x1b[31m2.0"}, "numpy": {"importable": "yes"},
                "plaidml": "no"}, "cpu_count": "many", "protocol": 999},
            {"event": "hello", "framework": "torch", "version": None, "import_s": "slow"},
            {"event": "devices", "devices": [{"id": "cuda:0", "kind": ["gpu"], "name": 5}, "cpu", None],
             "unavailable": {"x": 1}, "todo": "cuda:0"},
            {"event": "result", "device": "cuda:0", "stage": "speed", "data": {"images_per_s": "NaN",
                                                                               "median_s": -1}},
            {"event": "device_done", "device": None, "data": []},
            {"event": "done"},
        ]
        script = "#!" + sys.executable + "\nimport sys\n" + "".join(
            f"print({mark + json.dumps(ev)!r})\n" for ev in hostile_events) + "print('not a mark')\n"
        out = {
            "garbage": "#!/bin/sh\necho 'Segmentation fault'\nexit 139\n",
            "silent": "#!/bin/sh\nexit 0\n",
            "hostile": script,
        }
        paths = {}
        for name, text in out.items():
            p = folder / name
            p.write_text(text, encoding="utf-8")
            p.chmod(0o755)
            paths[name] = str(p)
        return paths

    def copy_of(self, path: str) -> str:
        """A fresh copy of one of the arena's files, for a command that may write over it: the
        originals stay as they are for the tests that read them after the fuzzing."""
        target = self.fresh(os.path.basename(path))
        shutil.copyfile(path, target)
        return target

    def fresh(self, name: str) -> str:
        """A new path in a folder that exists (nothing there yet)."""
        self.count += 1
        folder = self.base / "out" / f"{self.count}"
        folder.mkdir(parents=True, exist_ok=True)
        return str(folder / name)


@contextlib.contextmanager
def capture_streams(encoding: str) -> Iterator[Tuple[io.BytesIO, io.BytesIO]]:
    """sys.stdout/stderr as byte buffers behind text streams of `encoding` with strict errors, like a
    real interpreter started with PYTHONIOENCODING=<encoding> (main() makes them escape)."""
    out_b, err_b = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_b, encoding=encoding, errors="strict", write_through=True)
    err = io.TextIOWrapper(err_b, encoding=encoding, errors="strict", write_through=True)
    old = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        yield _Buf(out_b, out), _Buf(err_b, err)  # type: ignore[misc]
    finally:
        sys.stdout, sys.stderr = old


class _Buf:
    def __init__(self, raw: io.BytesIO, text: io.TextIOWrapper) -> None:
        self.raw, self.text = raw, text

    def getvalue(self) -> bytes:
        try:
            self.text.flush()
        except ValueError:
            pass
        return self.raw.getvalue()


@contextlib.contextmanager
def environment(env: Dict[str, Optional[str]]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in env}
    for k, v in env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def arena(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Arena]:
    base = tmp_path_factory.mktemp("fuzz")
    cache = base / "cache"
    with environment({"XDG_CACHE_HOME": str(cache), "PIP_INDEX_URL": DEAD_INDEX, "PIP_NO_INPUT": "1"}):
        yield Arena(base)


# -- strategies -------------------------------------------------------------------------------------------


def _value(arena: Arena, extra: List[str]) -> st.SearchStrategy[str]:
    """Mostly a sensible value, sometimes nonsense."""
    return st.one_of(st.sampled_from(extra), st.sampled_from(extra), st.sampled_from(NONSENSE))


@st.composite
def replay_source(draw: st.DrawFn, arena: Arena) -> List[str]:
    kind = draw(st.sampled_from(["good"] * 3 + ["hostile"] * 4 + ["report"] * 3 + ["odd", "none"]))
    if kind == "none":
        return []  # this machine (a live scan: rare, it costs an OpenCL child)
    pool = {"good": arena.good, "hostile": list(arena.hostile.values()), "report": list(arena.reports.values()),
            "odd": list(arena.odd.values()) + NONSENSE[:3]}[kind]
    return ["--replay", draw(st.sampled_from(pool))]


COMMON = ["--json", "-q", "-v", "--json", "--quiet", "--verbose", "--json"]
JSON_COMMANDS = {"scan", "plan", "install", "verify", "diff", "doctor"}
RARE = ["--help", "-h", "-V", "--version", "--bogus", "--json=1", "--replay", "bogus", "SCAN", "scan"]


@st.composite
def argv_strategy(draw: st.DrawFn, arena: Arena) -> List[str]:
    command = draw(st.sampled_from(["scan", "plan", "install", "report", "diff", "schema", "capture", "verify",
                                    "completion", "scan", "plan", "report", "install", "diff", "verify", "doctor",
                                    "doctor", "fleet", "fleet", "labels"]))
    argv: List[str] = [command]
    flags = draw(st.lists(st.sampled_from(COMMON), max_size=2, unique=True))
    if command not in JSON_COMMANDS and draw(st.integers(0, 4)):
        flags = [f for f in flags if f != "--json"]
    if draw(st.integers(0, 9)) and len({"-q", "--quiet"} & set(flags)) and len({"-v", "--verbose"} & set(flags)):
        flags = flags[:1]  # both is a usage error: now and then only
    if command in ("scan", "plan", "report", "install", "labels"):
        argv += draw(replay_source(arena))
    if command == "doctor":
        # replays only (a live doctor imports the frameworks: seconds per example), hostile ones included;
        # now and then --python with one of the interpreters that are not, which is a usage error with --replay
        argv += ["--replay", draw(st.sampled_from(arena.good + list(arena.hostile.values())
                                                  + list(arena.reports.values()) + list(arena.odd.values())))]
        if draw(st.integers(0, 5)) == 0:
            argv += ["--python", draw(st.sampled_from(list(arena.pythons.values()) or [arena.odd["missing"]]))]
    if command == "plan":
        argv += draw(st.sampled_from([[], [], ["--framework", "torch"], ["--framework", "keras"],
                                      ["--framework", "tensorflow"], ["--framework", "bogus"]]))
        if draw(st.integers(0, 2)) == 0:
            argv += ["--python", draw(_value(arena, ["3.10", "3.8", "2.7", "3.99", "4.0", "3.12.1"]))]
        if draw(st.integers(0, 2)) == 0:
            argv += ["--why-not", draw(_value(arena, ["torch-rocm", "neon", "torch-cuda", "plaidml",
                                                      "tensorflow-metal"]))]
    elif command == "install":
        argv += ["--index-url", DEAD_INDEX]  # what is drawn below comes later and wins
        argv += draw(st.sampled_from([[], ["--framework", "torch"], ["--framework", "tensorflow"],
                                      ["--recipe", draw(_value(arena, ["torch-cpu", "torch-rocm"]))]]))
        if draw(st.integers(0, 3)) == 0:
            argv += ["--recipe-file", draw(st.sampled_from(
                list(arena.recipes.values()) + list(arena.odd.values()) + [arena.reports["real"]]))]
        if draw(st.booleans()):
            argv += draw(st.sampled_from([
                ["--index-url", draw(_value(arena, ["file:///nonexistent", "ftp://x/", "http://", "https://[::1",
                                                    "http://127.0.0.1:1/simple/", "file://" + arena.odd["folder"]]))],
                ["--extra-index-url", "javascript:alert(1)"],
                ["--find-links", draw(st.sampled_from(list(arena.odd.values())))],
                ["--no-index"], ["--no-index", "--find-links", arena.odd["folder"]],
                ["--timeout", draw(_value(arena, ["0.01", "5"]))],
                ["--python", draw(_value(arena, ["3.10", "9.9", sys.executable]))],
                ["--installer", draw(st.sampled_from(["pip", "uv", "conda"]))],
                ["--recover"],
            ]))
        if draw(st.integers(0, 2)) == 0:
            argv += ["--apply", "--no-verify", "--venv", draw(st.sampled_from(
                [arena.fresh("venv"), arena.odd["text"], arena.odd["folder"], "/etc/mlprobe-fuzz-venv",
                 arena.fresh("v\xe9nv\x1b[1m")] + ([arena.odd["dev-null"]] if "dev-null" in arena.odd else [])))]
            argv += draw(st.sampled_from([[], ["--without-pip"], ["--log", draw(st.sampled_from(
                [arena.fresh("log.txt"), arena.odd["folder"], arena.odd["missing"] + "/x/y.log"]))]]))
    elif command == "report":
        argv += draw(st.sampled_from([[], ["-o", arena.fresh("r.json")], ["-o", arena.fresh("r.md")],
                                      ["-o", draw(st.sampled_from(list(arena.odd.values())))],
                                      ["--format", draw(st.sampled_from(["json", "markdown", "html"]))]]))
        argv += draw(st.lists(st.sampled_from(["--include-raw", "--no-redact"]), max_size=2, unique=True))
        if draw(st.integers(0, 3)) == 0 and arena.pythons:
            argv += ["--python", draw(st.sampled_from(list(arena.pythons.values())))]
    elif command == "diff":
        pool = arena.good + list(arena.hostile.values()) + list(arena.reports.values()) + list(arena.odd.values())
        argv += draw(st.lists(st.sampled_from(pool), min_size=0, max_size=3))
    elif command == "schema":
        argv += draw(st.sampled_from([[], ["scan"], ["report"], ["recipe"], ["doctor"], ["bogus"]]))
    elif command == "capture":
        argv += draw(st.sampled_from([[arena.fresh("bundle")], [arena.odd["text"]], [arena.odd["folder"]],
                                      [arena.odd["missing"] + "/deeper/still"], []]))
    elif command == "verify":
        # Only interpreters that are not (a real verify trains a network for seconds).
        pythons = list(arena.pythons.values()) or [arena.odd["missing"]]
        argv += ["--python", draw(st.sampled_from(pythons))]
        argv += draw(st.sampled_from([[], ["--timeout", draw(_value(arena, ["1", "0.5"]))],
                                      ["--device", draw(_value(arena, ["cuda:0", "llvm_cpu.0", "cuda:x"]))],
                                      ["--framework", draw(st.sampled_from(["torch", "plaidml", "jax"]))],
                                      ["--quick", "--no-cpu-peers"],
                                      ["--baseline-python", draw(st.sampled_from(pythons))]]))
    elif command == "fleet":
        argv += draw(fleet_args(arena))
    elif command == "labels":
        if draw(st.integers(0, 2)) == 0:
            argv += ["--prefix", draw(_value(arena, ["example.com", "kubernetes.io", "A_B", "x" * 300]))]
        if draw(st.booleans()):
            argv += ["-o", draw(st.sampled_from([arena.fresh("features"), arena.odd["folder"],
                                                 arena.copy_of(arena.reports["real"])]))]
    elif command == "completion":
        argv += draw(st.sampled_from([["bash"], ["zsh"], ["tcsh"], ["fish"], []]))
    argv += flags
    if draw(st.integers(0, 9)) == 0:
        argv.insert(draw(st.integers(0, len(argv))), draw(st.sampled_from(RARE + NONSENSE)))
    return argv


@st.composite
def fleet_args(draw: st.DrawFn, arena: Arena) -> List[str]:
    sub = draw(st.sampled_from(["merge", "merge", "show", "show", "show", "scan", "bogus", ""]))
    if sub == "merge":
        pool = list(arena.reports.values()) + [arena.report_folder] + list(arena.odd.values()) + arena.good[:2]
        files = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3))
        out = draw(st.sampled_from([[], [], ["-o", arena.fresh("fleet.json")], ["-o", files[0]],
                                    ["-o", arena.odd["folder"]]]))
        return ["merge", *files, *out, *draw(st.lists(st.sampled_from(["--skip-bad", "--embed-reports", "--json"]),
                                                     max_size=2, unique=True))]
    if sub == "show":
        f = draw(st.sampled_from(list(arena.fleets.values()) + list(arena.fleets.values())
                                 + [arena.reports["real"], arena.odd["text"], arena.odd["missing"]]))
        extra = draw(st.sampled_from([[], ["--all"], ["--json"], ["--html", arena.fresh("f.html")], ["--html", f]]))
        return ["show", f, *extra]
    if sub == "scan":  # nothing listens there: a quick, clear error
        return ["scan", "--address", "127.0.0.1:9", "--timeout", draw(_value(arena, ["1", "0.5"]))]
    return [sub] if sub else []


ENV_VALUES: Dict[str, List[Optional[str]]] = {
    "MLPROBE_OVERRIDE_PYTHON_VERSION": [None, "3.10", "3.8", "banana", "", "3", "99.99", "3.10\x1b[31m"],
    "MLPROBE_OVERRIDE_CPU_FLAGS": [None, "sse sse2", "", "avx512f " * 500, "\x1b[2J", "sse,sse2", "\u00e9"],
    "MLPROBE_OVERRIDE_NONSENSE": [None, "1"],
    "MLPROBE_PYTORCH_INDEX_URL": [None, "file:///nonexistent", "", "banana", "http://127.0.0.1:9/whl/",
                                  "ftp://x", "http://user:secret@127.0.0.1:9/whl/"],
    "COLUMNS": [None, "0", "-5", "abc", "1", "100000", "20"],
    "LINES": [None, "0", "-1"],
    "NO_COLOR": [None, "1", ""],
    "TERM": [None, "dumb", "xterm-256color", "", "vt100"],
    "FORCE_COLOR": [None, "1"],
}


@st.composite
def env_strategy(draw: st.DrawFn) -> Dict[str, Optional[str]]:
    env: Dict[str, Optional[str]] = {k: None for k in ENV_VALUES}
    for k in draw(st.lists(st.sampled_from(sorted(ENV_VALUES)), max_size=3, unique=True)):
        env[k] = draw(st.sampled_from(ENV_VALUES[k]))
    return env


# -- the checks -------------------------------------------------------------------------------------------


def check(argv: List[str], rc: Any, out: bytes, err: bytes) -> None:
    text = err.decode("utf-8", "replace")
    assert "Traceback" not in text, f"{argv}\n{text}"
    assert rc in EXIT_CODES, f"{argv}: exit {rc}\n{text[-3000:]}"
    for stream, data in (("stdout", out), ("stderr", err)):
        assert b"\x1b]8;" not in data and b"\x1b[2J" not in data, f"{argv}: an escape from the data on {stream}"
    informational = any(a in argv for a in ("--help", "-h", "-V", "--version"))
    if "--json" in argv and not informational and rc != 0 and out.strip():
        try:
            doc = json.loads(out)
        except ValueError:
            raise AssertionError(f"{argv}: --json output is not JSON: {out[:500]!r}") from None
        assert isinstance(doc, dict), argv


def run_in_process(argv: List[str], env: Dict[str, Optional[str]], encoding: str) -> Tuple[Any, bytes, bytes]:
    level = cli_level()
    with environment(env), capture_streams(encoding) as (out, err):
        try:
            rc: Any = cli.main(list(argv))
        except SystemExit as exc:  # --help and --version end through argparse
            rc = exc.code if exc.code is not None else 0
        finally:
            restore_level(level)
    return rc, out.getvalue(), err.getvalue()


def cli_level() -> int:
    from mlprobe import ui

    return ui.level()


def restore_level(level: int) -> None:
    from mlprobe import ui

    ui.set_level(level)


FUZZ_SETTINGS = settings(max_examples=examples(300), derandomize=True, database=None, deadline=None,
                         suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.slow
@FUZZ_SETTINGS
@given(data=st.data())
def test_cli_in_process(arena: Arena, data: st.DataObject) -> None:
    argv = data.draw(argv_strategy(arena), label="argv")
    env = data.draw(env_strategy(), label="env")
    encoding = data.draw(st.sampled_from(["utf-8", "ascii", "latin-1", "utf-8", "cp1252"]), label="encoding")
    rc, out, err = run_in_process(argv, env, encoding)
    check(argv, rc, out, err)


@pytest.mark.slow
@settings(max_examples=examples(12), derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_cli_as_a_real_process(arena: Arena, data: st.DataObject) -> None:
    argv = data.draw(argv_strategy(arena), label="argv")
    env = data.draw(env_strategy(), label="env")
    encoding = data.draw(st.sampled_from(["utf-8", "ascii", "latin-1"]), label="PYTHONIOENCODING")
    full = {k: v for k, v in os.environ.items() if k not in env}
    full.update({k: v for k, v in env.items() if v is not None})
    full["PYTHONIOENCODING"] = encoding
    full["PYTHONPATH"] = str(ROOT)
    p = subprocess.run([sys.executable, "-m", "mlprobe", *argv], capture_output=True, cwd=arena.base,
                       env=full, timeout=180)
    check(argv, p.returncode, p.stdout, p.stderr)


# What the fuzzing found, kept as plain examples (each was a traceback or a wrong exit status).
REGRESSIONS: Dict[str, Any] = {
    # an interpreter whose verify answers are of shapes the payload never sends: E604, exit 3
    "hostile-verify-answer": lambda a: ["verify", "--python", a.pythons["hostile"]],
    "hostile-verify-answer-plaidml": lambda a: ["verify", "--python", a.pythons["hostile"], "--framework", "plaidml"],
    "hostile-verify-answer-json": lambda a: ["verify", "--json", "--python", a.pythons["hostile"]],
    # a report written onto a FIFO nobody reads: E801, not a hang
    "report-onto-a-fifo": lambda a: ["report", "--replay", a.good[0], "-o", a.odd["fifo"]],
    # --recipe-file /dev/zero: refused, not read until memory runs out
    "recipe-file-dev-zero": lambda a: ["install", "--recipe-file", a.odd["dev-zero"]],
    # --python pointing at a folder: a usage error naming it
    "verify-python-folder": lambda a: ["verify", "--python", a.odd["folder"]],
}


# Hostile documents and facts, each command that reads them once (deterministic, beside the fuzzing).
HOSTILE_RUNS: Dict[str, Any] = {
    "fleet-show-hostile-keys": lambda a: ["fleet", "show", a.fleets["hostile-keys"], "--all"],
    "fleet-show-html-hostile-keys": lambda a: ["fleet", "show", a.fleets["hostile-keys"], "--html", a.fresh("f.html")],
    "fleet-merge-hostile-keys": lambda a: ["fleet", "merge", a.reports["hostile-keys"], a.reports["real"]],
    "fleet-merge-into-an-input": lambda a: ["fleet", "merge", a.report_folder, "-o", a.reports["real"]],
    "fleet-show-html-onto-itself": lambda a: ["fleet", "show", a.fleets["number-0"], "--html", a.fleets["number-0"]],
    "report-markdown-hostile-keys": lambda a: ["report", "--replay", a.hostile["markup-gpu"], "--format", "markdown"],
    "plan-markup-gpu": lambda a: ["plan", "--replay", a.hostile["markup-gpu"]],
    "scan-markup-gpu": lambda a: ["scan", "--replay", a.hostile["markup-gpu"]],
    "labels-markup-gpu": lambda a: ["labels", "--replay", a.hostile["markup-gpu"]],
    "scan-host-numbers": lambda a: ["scan", "--replay", a.hostile["host-numbers"]],
    "diff-hostile-keys": lambda a: ["diff", a.reports["real"], a.reports["hostile-keys"]],
    **{f"fleet-merge-number-{i}": (lambda a, i=i: ["fleet", "merge", a.reports[f"number-{i}"]])
       for i in range(len(HUGE_NUMBERS))},
    **{f"fleet-show-number-{i}": (lambda a, i=i: ["fleet", "show", a.fleets[f"number-{i}"]]) for i in range(4)},
    **{f"diff-number-{i}": (lambda a, i=i: ["diff", a.reports["real"], a.reports[f"number-{i}"]])
       for i in range(len(HUGE_NUMBERS))},
}


@pytest.mark.parametrize("name", sorted(HOSTILE_RUNS))
def test_cli_hostile_documents(arena: Arena, name: str) -> None:
    argv = HOSTILE_RUNS[name](arena)
    rc, out, err = run_in_process(argv, {"FORCE_COLOR": "1"}, "utf-8")
    check(argv, rc, out, err)
    text = out.decode("utf-8", "replace")
    if "number" in name or "onto" in name or "into" in name:
        assert rc == 2 and b"error [E" in err, (argv, err[-2000:])
    else:
        assert rc in (0, 1) if argv[0] == "diff" else rc == 0, (argv, err[-2000:])
        assert "\x1b[31mred" not in text and "\u202e" not in text


@pytest.mark.skipif(os.name != "posix", reason="fake interpreters, FIFOs and /dev/zero are POSIX")
@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_cli_regressions(arena: Arena, name: str) -> None:
    argv = REGRESSIONS[name](arena)
    rc, out, err = run_in_process(argv, {}, "ascii")
    check(argv, rc, out, err)
    assert rc in (2, 3), err
    assert b"error [E" in err


@pytest.mark.slow
def test_doctor_over_every_hostile_bundle_and_report(arena: Arena) -> None:
    """doctor on each odd bundle and report: no traceback, exit 0/1 (found or not) or 2 (refused),
    and with --json one JSON document either way."""
    sources = list(arena.hostile.values()) + list(arena.reports.values()) + arena.good
    for source in sources:
        argv = ["doctor", "--json", "--replay", source]
        rc, out, err = run_in_process(argv, {}, "utf-8")
        check(argv, rc, out, err)
        assert rc in (0, 1, 2), (argv, err[-2000:])
        doc = json.loads(out)
        assert isinstance(doc, dict) and ("verdict" in doc or "error" in doc), argv


@pytest.mark.skipif(os.name != "posix", reason="fake interpreters are POSIX scripts")
def test_doctor_asks_interpreters_that_are_not(arena: Arena) -> None:
    """--python naming a crashing, silent or lying interpreter: the enumeration's failure is a finding
    (or a usage error for what is no interpreter), never a traceback."""
    for name, python in sorted(arena.pythons.items()):
        argv = ["doctor", "--json", "--python", python]
        rc, out, err = run_in_process(argv, {}, "utf-8")
        check(argv, rc, out, err)
        assert rc in (0, 1, 2), (name, err[-2000:])
        doc = json.loads(out)
        if rc == 2:
            assert doc["error"]["ref"] == "E601", (name, doc)
        else:
            assert doc["python"] and doc["enumeration"], (name, doc)
