"""run_verify end to end through real child processes: a framework that crashes, hangs, raises or
returns NaN ends as UNAVAILABLE or WRONG_RESULTS with a reason, never as a hang or a traceback.

Fake frameworks are packages put first on PYTHONPATH; faults inside a real torch run come from the
payload's test-only `inject` option."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict

import pytest

from mlprobe.errors import EXIT_FAILURE, EXIT_OK, EXIT_UNAVAILABLE, StageError
from mlprobe.verify import run_verify
from mlprobe.verify.child import run_child
from mlprobe.verify.runner import Discovery, Found, discover, select_frameworks

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not importable in this interpreter "
                                                      "(pip install torch==2.13.0)")
# Small budgets: these tests prove behaviour, not speed.
FAST = {"speed_repeats": 3, "speed_min_repeats": 3, "speed_budget_s": 0.5, "speed_repeat_s": 0.05,
        "warmup_cpu": 1, "learn_max_s": 20.0}


def fake_framework(root: Path, name: str, body: str) -> Path:
    pkg = root / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(body, encoding="utf-8")
    return root


@pytest.fixture
def fake_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def make(name: str, body: str) -> Path:
        root = fake_framework(tmp_path / "fake", name, body)
        monkeypatch.setenv("PYTHONPATH", str(root))
        return root
    return make


def only(doc: Dict[str, Any], **match: Any) -> Dict[str, Any]:
    hits = [r for r in doc["results"] if all(r.get(k) == v for k, v in match.items())]
    assert len(hits) == 1, (match, [(r["framework"], r["device"], r["verdict"]) for r in doc["results"]])
    return hits[0]


def test_discover_sees_a_framework_without_importing_it(fake_path) -> None:
    # The fake torch would kill any process importing it: discovery must survive (find_spec only).
    fake_path("torch", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    disc = discover(sys.executable)
    assert disc.frameworks["torch"].importable is True
    assert disc.python == sys.version.split()[0]


def test_import_segfault_is_unavailable_with_the_signal(fake_path) -> None:
    fake_path("torch", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    doc = run_verify(framework="torch", cpu_peers=False)
    fw = doc["frameworks"][0]
    assert fw["status"] == "unavailable"
    assert "SIGSEGV" in fw["reason"] and "importing torch" in fw["reason"]
    rec = only(doc, framework="torch")
    assert rec["verdict"] == "UNAVAILABLE"
    assert doc["exit_code"] == EXIT_UNAVAILABLE


@pytest.mark.slow
def test_import_hang_is_unavailable_after_the_stall_limit(fake_path) -> None:
    fake_path("torch", "import time\nprint('loading...')\ntime.sleep(600)\n")
    t0 = time.monotonic()
    doc = run_verify(framework="torch", cpu_peers=False, timeout=60, stall=3)
    assert time.monotonic() - t0 < 30
    rec = only(doc, framework="torch")
    assert rec["verdict"] == "UNAVAILABLE"
    assert "hung" in rec["reason"] and "no progress for 3 s" in rec["reason"]


def test_import_error_is_unavailable_with_the_message_and_stdout_noise_is_ignored(fake_path) -> None:
    fake_path("torch", "print('{\"not\": \"protocol\"}')\nraise ImportError('libtorch_cuda.so: cannot open shared object file')\n")
    doc = run_verify(framework="torch", cpu_peers=False)
    rec = only(doc, framework="torch")
    assert rec["verdict"] == "UNAVAILABLE"
    assert "libtorch_cuda.so" in rec["reason"]
    assert "Traceback" not in rec["reason"]


def test_missing_framework_is_reported_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def found(**importable: bool) -> Discovery:
        return Discovery(frameworks={k: Found(importable=v) for k, v in importable.items()})

    chosen, missing = select_frameworks("tensorflow", found(tensorflow=False))
    assert chosen == [] and missing[0].status == "not installed"
    chosen, _ = select_frameworks("keras", found(plaidml=True, tensorflow=True))
    assert chosen == ["plaidml"]
    chosen, _ = select_frameworks("keras", found(tensorflow=True))
    assert chosen == ["tensorflow"]


def test_unknown_interpreter_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(StageError) as exc:
        run_verify(python=str(tmp_path / "nope" / "python"))
    assert exc.value.ref == "E601"


def test_child_protocol_survives_a_crash_after_partial_output(fake_path) -> None:
    fake_path("torch", "import os, signal\nos.kill(os.getpid(), signal.SIGABRT)\n")
    res = run_child(sys.executable, ["run", json.dumps({"framework": "torch"})], timeout=60, stall=30)
    assert res.ended == "crash" and res.detail == "SIGABRT"
    assert not res.clean


@pytest.mark.slow
@needs_torch
def test_torch_cpu_verify_passes_correctness_learning_and_speed() -> None:
    doc = run_verify(framework="torch", device="cpu", cpu_peers=False)
    rec = only(doc, framework="torch", device="cpu")
    assert rec["verdict"] == "CPU", rec["reason"]
    assert rec["correctness"]["passed"] and rec["correctness"]["loss_rel_err"] < 1e-5
    assert rec["learning"]["passed"] and rec["learning"]["accuracy"] >= 0.9
    sp = rec["speed"]
    assert sp["images_per_s"] > 0 and sp["batch"] == 128 and sp["repeats"] >= 3
    assert sp["seconds_per_epoch"] == pytest.approx(60000 / sp["images_per_s"])
    assert rec["proof"]["tensor_device"] == "cpu"
    assert doc["best_cpu"]["framework"] == "torch"
    assert doc["exit_code"] == EXIT_OK
    assert doc["wall_s"] < 90  # the acceptance bar is 20 s on an idle 2-core machine; CI may be busy


@pytest.mark.slow
@needs_torch
@pytest.mark.parametrize("stage", ["correctness", "learning", "speed"])
def test_nan_gives_wrong_results(stage: str) -> None:
    doc = run_verify(framework="torch", device="cpu", cpu_peers=False, overrides=FAST,
                     inject={"device": "cpu", "stage": stage, "fault": "nan"})
    rec = only(doc, framework="torch", device="cpu")
    assert rec["verdict"] == "WRONG_RESULTS"
    assert "NaN" in rec["reason"]
    assert doc["exit_code"] == EXIT_FAILURE


@pytest.mark.slow
@needs_torch
def test_segfault_during_speed_keeps_earlier_stages_and_is_unavailable() -> None:
    doc = run_verify(framework="torch", device="cpu", cpu_peers=False, overrides=FAST,
                     inject={"device": "cpu", "stage": "speed", "fault": "segv"})
    rec = only(doc, framework="torch", device="cpu")
    assert rec["verdict"] == "UNAVAILABLE"
    assert "SIGSEGV" in rec["reason"] and "speed test" in rec["reason"]
    assert rec["correctness"]["passed"] and rec["learning"]["passed"]
    assert doc["exit_code"] == EXIT_UNAVAILABLE


@pytest.mark.slow
@needs_torch
def test_hang_during_learning_is_unavailable_not_a_hang() -> None:
    t0 = time.monotonic()
    doc = run_verify(framework="torch", device="cpu", cpu_peers=False, overrides=FAST, stall=15, timeout=120,
                     inject={"device": "cpu", "stage": "learning", "fault": "hang"})
    assert time.monotonic() - t0 < 60
    rec = only(doc, framework="torch", device="cpu")
    assert rec["verdict"] == "UNAVAILABLE"
    assert "hung" in rec["reason"] and "learning test" in rec["reason"]


@pytest.mark.slow
@needs_torch
def test_exception_in_a_stage_is_unavailable_with_its_message() -> None:
    doc = run_verify(framework="torch", device="cpu", cpu_peers=False, overrides=FAST,
                     inject={"device": "cpu", "stage": "correctness", "fault": "raise"})
    rec = only(doc, framework="torch", device="cpu")
    assert rec["verdict"] == "UNAVAILABLE"
    assert "injected fault" in rec["reason"]


@pytest.mark.slow
@needs_torch
def test_absent_accelerator_request_is_not_seen_with_the_build_reason() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    doc = run_verify(framework="torch", device="cuda", cpu_peers=False, overrides=FAST)
    rec = only(doc, framework="torch", device="cuda")
    assert rec["verdict"] == "NOT_SEEN" and rec["listed_devices"] == ["cpu"]
    assert "CPU-only build" in rec["reason"] or "is_available" in rec["reason"]
    assert not any(r["device"] == "cpu" for r in doc["results"])  # no baseline without a device to compare
    assert doc["exit_code"] == EXIT_FAILURE  # a device asked for and not listed is a failure found


def test_cli_json_prints_only_json_and_returns_the_exit_code(tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(fake_framework(tmp_path / "fake", "torch", "raise ImportError('broken build')\n"))
    proc = subprocess.run([sys.executable, "-m", "mlprobe", "verify", "--framework", "torch", "--json",
                           "--no-cpu-peers"], capture_output=True, text=True, env=env, timeout=120)
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "mlprobe.verify/1"
    assert proc.returncode == EXIT_UNAVAILABLE == doc["exit_code"]
    assert "Traceback" not in proc.stderr


def test_a_crash_costs_only_its_device_and_the_rest_run_in_a_new_child(monkeypatch: pytest.MonkeyPatch) -> None:
    from mlprobe.verify import children as runner
    from mlprobe.verify.child import ChildResult

    devices = [{"id": "cpu", "kind": "cpu"}, {"id": "cuda:0", "kind": "cuda"}, {"id": "cuda:1", "kind": "cuda"}]
    ok = {"correctness": {"passed": True}, "learning": {"passed": True}, "speed": {"images_per_s": 10.0}}
    calls = []

    def fake_child(python, args, env=None, timeout=0, stall=0, on_event=None):  # type: ignore[no-untyped-def]
        cfg = json.loads(args[1])
        calls.append(cfg)
        head = [{"event": "hello", "version": "9"}, {"event": "devices", "devices": devices, "unavailable": []}]
        if len(calls) == 1:
            evs = head + [{"event": "device_done", "device": "cpu", "data": ok},
                          {"event": "stage", "device": "cuda:0", "stage": "speed"}]
            return ChildResult(events=evs, returncode=-11, ended="crash", detail="SIGSEGV")
        evs = head + [{"event": "device_done", "device": d, "data": ok} for d in cfg["devices"]] + [{"event": "done"}]
        return ChildResult(events=evs, returncode=0)

    monkeypatch.setattr(runner, "run_child", fake_child)
    run = runner.FrameworkChildren("python", "torch", runner.RunOptions(quick=False, timeout=5, stall=5), None)
    todo = runner.run_torch_or_tf(run, None)
    assert todo == ["cpu", "cuda:0", "cuda:1"]
    assert set(run.done) == {"cpu", "cuda:1"}
    assert "SIGSEGV" in run.failed["cuda:0"]["message"] and "speed test" in run.failed["cuda:0"]["message"]
    assert calls[1]["devices"] == ["cuda:1"] and calls[1]["cpu_baseline"] is False


SPLIT_DEVICES = [{"id": "cpu", "kind": "cpu"}, {"id": "cuda:0", "kind": "cuda"}, {"id": "cuda:1", "kind": "cuda"}]
SPLIT_OK = {"correctness": {"passed": True}, "learning": {"passed": True}, "speed": {"images_per_s": 10.0}}


def split_child(calls: list, accel_fails: str = ""):  # type: ignore[no-untyped-def,type-arg]
    """A fake child for a split run: it lists SPLIT_DEVICES and runs the ones its config asks for."""
    from mlprobe.verify.child import ChildResult

    def fake(python, args, env=None, timeout=0, stall=0, on_event=None, gate=None):  # type: ignore[no-untyped-def]
        cfg = json.loads(args[1])
        calls.append(cfg)
        want = cfg.get("devices") or ["cpu", "gpu"]
        if accel_fails and want == ["gpu"]:
            return ChildResult(events=[], returncode=-11, ended="crash", detail="SIGSEGV",
                               stderr_tail=accel_fails)
        head = [{"event": "hello", "version": "9"},
                {"event": "devices", "devices": SPLIT_DEVICES, "unavailable": [{"id": "mps", "reason": "no"}]}]
        runs = [d["id"] for d in SPLIT_DEVICES if "gpu" in want and d["kind"] != "cpu" or d["id"] in want]
        evs = head + [{"event": "device_done", "device": d, "data": SPLIT_OK} for d in runs] + [{"event": "done"}]
        return ChildResult(events=evs, returncode=0)
    return fake


def test_a_split_run_times_the_cpu_and_the_accelerators_in_two_children_and_joins_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from mlprobe.verify import children

    calls: list = []  # type: ignore[type-arg]
    monkeypatch.setattr(children, "run_child", split_child(calls))
    run = children.FrameworkChildren("python", "torch", children.RunOptions(quick=False, timeout=5, stall=5), None)
    todo = children.run_split(run)
    assert todo == ["cpu", "cuda:0", "cuda:1"]  # the order one child gives: the CPU first
    assert set(run.done) == {"cpu", "cuda:0", "cuda:1"} and not run.failed and run.fatal is None
    asked = sorted((c["devices"], c["cpu_baseline"], c.get("cpu_only", False)) for c in calls)
    # the accelerators' child does not time the CPU again; the CPU's starts no accelerator
    assert asked == [(["cpu"], True, True), (["gpu"], False, False)]
    assert run.unavailable == [{"id": "mps", "reason": "no"}]  # both children list it: once


def test_a_split_run_whose_accelerator_child_dies_says_so_and_keeps_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from mlprobe.verify import children

    calls: list = []  # type: ignore[type-arg]
    monkeypatch.setattr(children, "run_child", split_child(calls, accel_fails="Fatal Python error: cuInit"))
    run = children.FrameworkChildren("python", "torch", children.RunOptions(quick=False, timeout=5, stall=5), None)
    todo = children.run_split(run)
    assert todo == ["cpu"] and set(run.done) == {"cpu"} and run.fatal is None
    gone = [u for u in run.unavailable if u["id"] == "gpu"]
    assert gone and "accelerators" in str(gone[0]["reason"]) and "SIGSEGV" in str(gone[0]["reason"])


def test_a_split_run_whose_cpu_child_dies_keeps_the_accelerators_and_fails_the_cpu(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from mlprobe.verify import children
    from mlprobe.verify.child import ChildResult

    calls: list = []  # type: ignore[type-arg]
    accel = split_child(calls)

    def fake(python, args, env=None, timeout=0, stall=0, on_event=None, gate=None):  # type: ignore[no-untyped-def]
        if json.loads(args[1]).get("cpu_only"):
            calls.append(json.loads(args[1]))
            return ChildResult(events=[], returncode=-9, ended="crash", detail="SIGKILL")
        return accel(python, args, env, timeout, stall, on_event, gate)

    monkeypatch.setattr(children, "run_child", fake)
    run = children.FrameworkChildren("python", "torch", children.RunOptions(quick=False, timeout=5, stall=5), None)
    todo = children.run_split(run)
    assert todo == ["cpu", "cuda:0", "cuda:1"] and run.fatal is None
    assert set(run.done) == {"cuda:0", "cuda:1"} and "SIGKILL" in str(run.failed["cpu"]["message"])


def test_when_a_framework_splits_its_devices() -> None:
    from mlprobe.verify.children import split_devices
    from mlprobe.verify.overlap import TimingGate

    gate = TimingGate()
    cuda, cpu_build = Found(importable=True, version="2.11.0+cu130"), Found(importable=True, version="2.13.0+cpu")
    assert split_devices("torch", cuda, None, gate, {"MLPROBE_VERIFY_SPLIT": "1"})
    assert not split_devices("torch", cuda, None, gate, {"MLPROBE_VERIFY_SPLIT": "0"})
    assert not split_devices("torch", cuda, "cuda:0", gate, {"MLPROBE_VERIFY_SPLIT": "1"})  # a --device run
    assert not split_devices("torch", cuda, None, None, {"MLPROBE_VERIFY_SPLIT": "1"})  # the serial schedule
    assert not split_devices("plaidml", cuda, None, gate, {"MLPROBE_VERIFY_SPLIT": "1"})  # one per device already
    assert split_devices("jax", cuda, None, gate, {"MLPROBE_VERIFY_SPLIT": "1"})
    assert not split_devices("tensorflow", cuda, None, gate, {"MLPROBE_VERIFY_SPLIT": "1"})  # GPU memory, twice
    assert not split_devices("torch", cpu_build, None, gate, {})  # a CPU-only build has nothing to split off


@needs_torch
@pytest.mark.slow
def test_a_forced_split_on_a_cpu_only_torch_gives_the_same_devices_and_verdicts(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = run_verify(framework="torch", cpu_peers=False, overrides=FAST)
    monkeypatch.setenv("MLPROBE_VERIFY_SPLIT", "1")
    split = run_verify(framework="torch", cpu_peers=False, overrides=FAST)

    def shape(doc: Dict[str, Any]) -> Any:
        return ([(r["framework"], r["device"], r["verdict"]) for r in doc["results"]],
                [(f["name"], f["status"], f.get("unavailable_devices"), f.get("notes")) for f in doc["frameworks"]])
    assert shape(split) == shape(plain)
    assert only(split, device="cpu")["verdict"] == "CPU"


def plaidml_child(calls: list, crash: str = "", list_fails: bool = False):  # type: ignore[no-untyped-def,type-arg]
    """A fake PlaidML child: the stable listing has the CPU, the experimental one a GPU too; a device
    child runs the device PLAIDML_DEVICE_IDS names (or crashes, for `crash`)."""
    from mlprobe.verify.child import ChildResult

    cpu = {"id": "llvm_cpu.0", "kind": "cpu"}
    gpu = {"id": "opencl_nvidia_h200.0", "kind": "gpu"}

    def fake(python, args, env=None, timeout=0, stall=0, on_event=None, gate=None):  # type: ignore[no-untyped-def]
        cfg = json.loads(args[1])
        calls.append((cfg, env["PLAIDML_EXPERIMENTAL"], env["PLAIDML_DEVICE_IDS"], time.monotonic()))
        time.sleep(0.3)
        if list_fails:
            return ChildResult(events=[], returncode=-11, ended="crash", detail="SIGSEGV")
        listed = [cpu, gpu] if env["PLAIDML_EXPERIMENTAL"] == "1" else [cpu]
        head = [{"event": "hello", "version": "0.7.0"}, {"event": "devices", "devices": listed, "unavailable": []}]
        if cfg.get("enumerate_only"):
            return ChildResult(events=head + [{"event": "done"}], returncode=0)
        did = env["PLAIDML_DEVICE_IDS"]
        if did == crash:
            return ChildResult(events=head + [{"event": "stage", "device": did, "stage": "speed"}],
                               returncode=-11, ended="crash", detail="SIGSEGV")
        return ChildResult(events=head + [{"event": "device_done", "device": did, "data": SPLIT_OK},
                                          {"event": "done"}], returncode=0)
    return fake


@pytest.mark.parametrize("together", [False, True])
def test_plaidml_lists_then_runs_a_child_per_device(monkeypatch: pytest.MonkeyPatch, together: bool) -> None:
    from mlprobe.verify import children
    from mlprobe.verify.overlap import TimingGate

    calls: list = []  # type: ignore[type-arg]
    monkeypatch.setattr(children, "run_child", plaidml_child(calls, crash="opencl_nvidia_h200.0"))
    monkeypatch.delenv("PLAIDML_EXPERIMENTAL", raising=False)
    opts = children.RunOptions(quick=False, timeout=5, stall=5, gate=TimingGate() if together else None)
    run = children.FrameworkChildren("python", "plaidml", opts, None)
    todo = children.run_plaidml(run, None)
    assert todo == ["llvm_cpu.0", "opencl_nvidia_h200.0"] and run.fatal is None
    assert set(run.done) == {"llvm_cpu.0"}
    assert "SIGSEGV" in run.failed["opencl_nvidia_h200.0"]["message"]  # the crash costs its device only
    assert run.meta["opencl_nvidia_h200.0"]["experimental"] is True and run.meta["llvm_cpu.0"]["experimental"] is False
    runs = [(c[2], c[1]) for c in calls if not c[0].get("enumerate_only")]
    assert sorted(runs) == [("llvm_cpu.0", "0"), ("opencl_nvidia_h200.0", "1")]
    starts = sorted(c[3] for c in calls)
    # overlapped: the two listings start together, then the two devices; serial: four starts in turn
    spread = [round(b - a, 1) for a, b in zip(starts, starts[1:])]
    assert (spread[0] < 0.2 and spread[2] < 0.2) if together else min(spread) >= 0.25


def test_plaidml_that_cannot_list_its_devices_is_a_fatal_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from mlprobe.verify import children

    calls: list = []  # type: ignore[type-arg]
    monkeypatch.setattr(children, "run_child", plaidml_child(calls, list_fails=True))
    monkeypatch.delenv("PLAIDML_EXPERIMENTAL", raising=False)
    run = children.FrameworkChildren("python", "plaidml", children.RunOptions(quick=False, timeout=5, stall=5), None)
    assert children.run_plaidml(run, None) == []
    assert run.fatal is not None and "SIGSEGV" in str(run.fatal["message"])
    assert len(calls) == 1  # serial: no second listing after the first failed


def test_mlprobe_process_never_imports_the_framework(tmp_path: Path) -> None:
    root = fake_framework(tmp_path / "fake", "torch", "raise ImportError('not a real torch')\n")
    code = ("import sys\nfrom mlprobe.verify import run_verify\n"
            "doc = run_verify(framework='torch', cpu_peers=False)\n"
            "assert 'torch' not in sys.modules and 'tensorflow' not in sys.modules\n"
            "print(doc['results'][0]['verdict'])\n")
    env = dict(os.environ, PYTHONPATH=str(root))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "UNAVAILABLE"
