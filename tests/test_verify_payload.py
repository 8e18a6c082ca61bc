"""The payload's pure parts, imported here as modules (it runs as a script in the target): data
generators, statistics, the float64 numpy reference of the CNN (checked against finite differences
and, where torch exists, against torch), that it runs on Python 3.7 (vermin, and a real 3.7 where
there is one), and how the package loads in the target: only the backend a run names, by a private
package name, with nothing of mlprobe on its path."""

from __future__ import annotations

import ast
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from mlprobe.verify import runner
from mlprobe.verify.child import PAYLOAD
from mlprobe.verify.payload import _harness as P
from mlprobe.verify.payload._numpy_ref import np_cnn_loss_grads

from .pyfloor import TARGET_FLOOR, old_python, too_new

HAS_NUMPY = importlib.util.find_spec("numpy") is not None
HAS_TORCH = importlib.util.find_spec("torch") is not None
FILES = sorted(PAYLOAD.parent.glob("*.py"))
BACKENDS = [f.stem for f in FILES if not f.stem.startswith("_")]


def test_the_package_has_its_backends() -> None:
    assert PAYLOAD.name == "__main__.py" and PAYLOAD.is_file()
    assert set(BACKENDS) == set(runner.FRAMEWORKS)  # one file per framework the registry says it trains


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_payload_runs_on_python37(path: Path) -> None:
    """vermin, not ast.parse(feature_version=(3, 7)), which accepts walrus, positional-only parameters
    and the modules and functions of later releases (tests/pyfloor.py)."""
    assert too_new(path.read_text(encoding="utf-8"), path.name, TARGET_FLOOR) == []


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_payload_imports_only_the_standard_library_and_its_own_files_at_top_level(path: object) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))  # type: ignore[attr-defined]
    top, own = set(), set()
    for node in ast.walk(tree) if path.name == "__main__.py" else tree.body:  # type: ignore[attr-defined]
        if isinstance(node, ast.Import) and node.col_offset == 0:
            top.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.col_offset == 0:
            if node.level:
                own.add(node.module or "")
            else:
                top.add((node.module or "").split(".")[0])
    assert top <= {"json", "math", "os", "platform", "random", "sys", "threading", "time", "traceback", "importlib"}
    # a backend shares code through the harness and the numpy reference, never through another backend
    assert own <= {"_harness", "_numpy_ref"}


def _run(*args: str, cwd: object = None) -> tuple:
    """Run the payload as the child does, and list the modules it had loaded when it ended."""
    wrapper = ("import atexit, runpy, sys\n"
               "atexit.register(lambda: sys.__stderr__.write('MODULES ' + ' '.join(sorted(sys.modules)) + '\\n'))\n"
               "sys.argv = sys.argv[1:]\n"
               "runpy.run_path(sys.argv[0], run_name='__main__')\n")
    out = subprocess.run([sys.executable, "-c", wrapper, str(PAYLOAD), *args], capture_output=True,
                         text=True, timeout=120, cwd=cwd)
    line = next(ln for ln in out.stderr.splitlines() if ln.startswith("MODULES "))
    mark = "@@mlprobe-verify@@ "
    return set(line.split()[1:]), [json.loads(ln[len(mark):]) for ln in out.stdout.splitlines() if ln.startswith(mark)]


def test_a_run_loads_only_the_backend_it_names_and_nothing_of_mlprobe(tmp_path: object) -> None:
    mods, events = _run("run", json.dumps({"framework": "plaidml", "enumerate_only": True}), cwd=tmp_path)
    assert "_mlprobe_payload.plaidml" in mods and "_mlprobe_payload._harness" in mods
    for other in set(BACKENDS) - {"plaidml"}:
        assert "_mlprobe_payload." + other not in mods
    assert not [m for m in mods if m == "mlprobe" or m.startswith("mlprobe.")]
    assert events[-1]["event"] in ("fatal", "done")  # plaidml is absent here: a fatal import, said


def test_discover_imports_no_framework() -> None:
    mods, events = _run("discover", json.dumps({"frameworks": list(runner.FRAMEWORKS) + ["nothing"]}))
    assert not {"torch", "tensorflow", "jax", "plaidml"} & mods
    (ev,) = [e for e in events if e["event"] == "discover"]
    assert set(ev["frameworks"]) >= set(runner.FRAMEWORKS) | {"numpy", "keras", "torch_directml"}
    assert ev["frameworks"]["nothing"]["importable"] is False


@pytest.mark.slow
@pytest.mark.skipif(not HAS_TORCH, reason="needs torch")
def test_the_torch_backend_file_does_not_shadow_torch() -> None:
    import torch

    _, events = _run("run", json.dumps({"framework": "torch", "enumerate_only": True}))
    hello = next(e for e in events if e["event"] == "hello")
    assert hello["version"] == torch.__version__
    assert [d["id"] for d in next(e for e in events if e["event"] == "devices")["devices"]][0] == "cpu"


def test_the_runner_states_and_sends_the_payload_defaults() -> None:
    for key in ("loss_rtol", "grad_rtol", "learn_target", "speed_batch"):
        assert runner.TOLERANCES[key] == P.DEFAULTS[key]
    quick = P.settings({"quick": True, "learn_max_s": 60.0, "speed_repeats": 9})
    assert quick["speed_repeats"] == 3 and quick["learn_max_s"] == 15.0 and quick["loss_rtol"] == P.DEFAULTS["loss_rtol"]
    assert P.settings(quick) == quick  # the runner's config, read again in the child, says the same


def test_the_payload_runs_on_a_real_python37(tmp_path: Path) -> None:
    """The real interpreter, where this machine has one (tests/pyfloor.py says where it looks): every
    payload file compiles there, discover answers, and a run of an absent framework says so."""
    exe, why = old_python(TARGET_FLOOR)
    if exe is None:
        pytest.skip(why)
    compiled = subprocess.run([exe, "-c", "import os, sys, py_compile\n"
                               "for f in sys.argv[2:]:\n"
                               "    py_compile.compile(f, os.path.join(sys.argv[1], os.path.basename(f) + 'c'), doraise=True)",
                               str(tmp_path), *map(str, FILES)], capture_output=True, text=True, timeout=60)
    assert compiled.returncode == 0, compiled.stderr
    assert len(list(tmp_path.glob("*.pyc"))) == len(FILES)
    out = subprocess.run([exe, str(PAYLOAD), "discover", json.dumps({"frameworks": ["torch", "nothing"]})],
                         capture_output=True, text=True, timeout=60).stdout
    (ev,) = [json.loads(ln.split(" ", 1)[1]) for ln in out.splitlines() if '"event": "discover"' in ln]
    assert ev["python"].startswith("3.7.") and ev["frameworks"]["nothing"]["importable"] is False
    run = subprocess.run([exe, str(PAYLOAD), "run", json.dumps({"framework": "plaidml", "enumerate_only": True})],
                         capture_output=True, text=True, timeout=60)
    events = [json.loads(ln.split(" ", 1)[1]) for ln in run.stdout.splitlines() if ln.startswith("@@mlprobe-verify@@ ")]
    assert events and events[-1]["event"] in ("fatal", "done"), run.stdout + run.stderr
    assert "Traceback" not in run.stderr


def test_learning_data_is_seeded_and_learnable_by_construction() -> None:
    xs, ys = P.learning_data(7, 200)
    assert (xs, ys) == P.learning_data(7, 200)
    assert xs != P.learning_data(8, 200)[0]
    s = P.LEARN_SIZE
    assert len(xs) == 200 * s * s and set(ys) == set(range(10))
    # The class is recoverable from the brightest 2x2 block: the task is learnable, not noise.
    right = 0
    for i, y in enumerate(ys):
        img = xs[i * s * s:(i + 1) * s * s]
        best = max(((img[r * s + c] + img[r * s + c + 1] + img[(r + 1) * s + c] + img[(r + 1) * s + c + 1]), r, c)
                   for r in range(s - 1) for c in range(s - 1))
        _, r, c = best
        guess = (0 if r < 8 else 5) + min(4, max(0, round((c - 1) / 3)))
        right += guess == y
    assert right / len(ys) > 0.95


def test_correctness_batch_shape() -> None:
    xs, ys = P.correctness_batch(1, 4)
    assert len(xs) == 4 * 28 * 28 and len(ys) == 4 and all(0 <= v < 1 for v in xs)


def test_median_and_compare_grads() -> None:
    assert P.median([3, 1, 2]) == 2 and P.median([4, 1, 2, 3]) == 2.5 and P.median([]) is None
    rel, worst = P.compare_grads([([1.0, 2.0], [1.0, 2.0]), ([0.0], [0.0])])
    assert rel == 0 and worst == 0
    rel, worst = P.compare_grads([([1.1, 2.0], [1.0, 2.0]), ([3.0], [3.0])])
    assert rel == pytest.approx(0.1 / math.sqrt(14)) and worst == pytest.approx(0.1 / math.sqrt(5))
    rel, _ = P.compare_grads([([float("nan")], [1.0])])
    assert not math.isfinite(rel)


def test_correctness_record_applies_the_stated_tolerances() -> None:
    cfg = dict(P.DEFAULTS)
    ok = P.correctness_record(cfg, 2.3001, 2.3, 1e-3, 2e-3)
    assert ok["passed"] and not ok["nan"]
    assert not P.correctness_record(cfg, 2.4, 2.3, 1e-3, 2e-3)["passed"]
    assert not P.correctness_record(cfg, 2.3, 2.3, 0.5, 0.5)["passed"]
    bad = P.correctness_record(cfg, float("nan"), 2.3, 0.0, 0.0)
    assert bad["nan"] and not bad["passed"] and bad["loss"] is None


def test_speed_plan_stays_in_budget() -> None:
    cfg = dict(P.DEFAULTS)
    assert P.speed_plan(cfg, 0.001, True) == (250, 7)  # fast GPU: many steps per synchronised repeat
    assert P.speed_plan(cfg, 0.08, False) == (4, 7)
    k, r = P.speed_plan(cfg, 6.0, False)  # PlaidML on a CPU: one step per repeat, the minimum repeats
    assert (k, r) == (1, 3)


def test_wanted_matches_ids_kinds_and_gpu() -> None:
    cuda = {"id": "cuda:0", "kind": "cuda", "api": "cuda"}
    rocm = {"id": "cuda:0", "kind": "rocm", "api": "hip"}
    assert P.wanted(cuda, ["cuda"]) and P.wanted(cuda, ["cuda:0"]) and P.wanted(cuda, ["gpu"])
    assert P.wanted(rocm, ["rocm"]) and P.wanted(rocm, ["cuda"]) and not P.wanted(rocm, ["mps"])
    assert P.wanted({"id": "cpu", "kind": "cpu"}, None)
    assert not P.wanted({"id": "cpu", "kind": "cpu"}, ["gpu"])


@pytest.mark.skipif(not HAS_NUMPY, reason="numpy is not importable here")
def test_numpy_reference_gradients_match_finite_differences() -> None:
    import numpy as np

    rng = np.random.RandomState(0)
    shapes = [(3, 3, 1, 32), (32,), (3, 3, 32, 64), (64,), (9216, 128), (128,), (128, 10), (10,)]
    w = [rng.uniform(-0.1, 0.1, size=s) if len(s) > 1 else rng.uniform(-0.05, 0.05, size=s) for s in shapes]
    x = rng.rand(2, 28, 28, 1)
    y = np.array([3, 7])
    _, grads = np_cnn_loss_grads(np, w, x, y, clip=0.0)
    assert [g.shape for g in grads] == shapes
    eps = 1e-6
    for i, idx in [(0, (1, 2, 0, 5)), (1, (3,)), (2, (0, 1, 4, 9)), (4, (100, 7)), (6, (5, 3)), (7, (3,))]:
        plus = [a.copy() for a in w]
        minus = [a.copy() for a in w]
        plus[i][idx] += eps
        minus[i][idx] -= eps
        num = (np_cnn_loss_grads(np, plus, x, y, 0.0)[0] - np_cnn_loss_grads(np, minus, x, y, 0.0)[0]) / (2 * eps)
        assert grads[i][idx] == pytest.approx(num, rel=1e-4, abs=1e-8), (i, idx)


@pytest.mark.slow
@pytest.mark.skipif(not (HAS_NUMPY and HAS_TORCH), reason="needs numpy and torch")
def test_numpy_reference_matches_torch_on_the_same_weights() -> None:
    import numpy as np
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 3), torch.nn.ReLU(), torch.nn.Conv2d(32, 64, 3), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(9216, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 10)).double()
    xs, ys = P.correctness_batch(3, 4)
    x = torch.tensor(xs, dtype=torch.float64).view(4, 1, 28, 28)
    y = torch.tensor(ys)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    c1, c2, l1, l2 = model[0], model[2], model[6], model[8]

    def chw_to_hwc_rows(w: "torch.Tensor") -> "np.ndarray":  # torch flattens C,H,W; Keras H,W,C
        return w.detach().numpy().reshape(128, 64, 12, 12).transpose(0, 2, 3, 1).reshape(128, 9216).T

    weights = [c1.weight.detach().numpy().transpose(2, 3, 1, 0), c1.bias.detach().numpy(),
               c2.weight.detach().numpy().transpose(2, 3, 1, 0), c2.bias.detach().numpy(),
               chw_to_hwc_rows(l1.weight), l1.bias.detach().numpy(), l2.weight.detach().numpy().T,
               l2.bias.detach().numpy()]
    ref_loss, grads = np_cnn_loss_grads(np, weights, x.numpy().transpose(0, 2, 3, 1), np.array(ys), clip=0.0)
    assert ref_loss == pytest.approx(loss.item(), rel=1e-10)
    np.testing.assert_allclose(grads[2], c2.weight.grad.numpy().transpose(2, 3, 1, 0), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(grads[4], chw_to_hwc_rows(l1.weight.grad), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(grads[0], c1.weight.grad.numpy().transpose(2, 3, 1, 0), rtol=1e-8, atol=1e-12)


@pytest.mark.slow
@pytest.mark.skipif(not HAS_TORCH, reason="needs torch")
@pytest.mark.parametrize("which", ["adam", "adadelta"])
@pytest.mark.parametrize("foreach", [False, True])
def test_the_payloads_optimizers_update_as_torch_optim_does(which: str, foreach: bool) -> None:
    # verify trains without torch.optim (its first step imports torch._dynamo, seconds of import);
    # the updates must be torch.optim's, on both paths (per tensor; one call over all tensors)
    import torch
    import torch.nn.functional as F

    from mlprobe.verify.payload import torch as T

    def model() -> "torch.nn.Module":
        torch.manual_seed(7)
        return torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                   torch.nn.Linear(4 * 6 * 6, 10)).double()

    ours_m, theirs_m = model(), model()
    if which == "adam":
        ours = T.adam(torch, ours_m.parameters(), lr=0.01)
        theirs = torch.optim.Adam(theirs_m.parameters(), lr=0.01, foreach=foreach)
    else:
        ours = T.adadelta(torch, ours_m.parameters(), lr=1.0, rho=0.95, eps=1e-7)
        theirs = torch.optim.Adadelta(theirs_m.parameters(), lr=1.0, rho=0.95, eps=1e-7, foreach=foreach)
    ours.foreach = foreach
    gen = torch.Generator().manual_seed(3)
    for _ in range(5):
        x = torch.rand(8, 1, 8, 8, generator=gen, dtype=torch.float64)
        y = torch.randint(0, 10, (8,), generator=gen)
        for m, opt in ((ours_m, ours), (theirs_m, theirs)):
            opt.zero_grad()
            F.cross_entropy(m(x), y).backward()
            opt.step()
    moved = 0.0
    for a, b, start in zip(ours_m.parameters(), theirs_m.parameters(), model().parameters()):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)
        moved += float((a - start).abs().sum().detach())
    assert moved > 1e-3  # the parameters did move: the comparison is not of two untouched models


@pytest.mark.slow
@pytest.mark.skipif(not HAS_TORCH, reason="needs torch")
def test_a_torch_run_does_not_import_torch_dynamo() -> None:
    code = ("import sys, json\n"
            "from mlprobe.verify.payload import torch as T, _harness as H\n"
            "H._proto = sys.stderr\n"
            "cfg = {'seed': 1, 'speed_batch': 8, 'quick': True, 'warmup_cpu': 1, 'warmup_accel': 1,\n"
            "       'speed_repeats': 2, 'speed_min_repeats': 1, 'speed_repeat_s': 0.01, 'speed_budget_s': 1,\n"
            "       'speed_stable_after': 2, 'speed_stable_rtol': 0.5, 'learn_max_steps': 10, 'learn_max_s': 5,\n"
            "       'learn_batch': 32, 'learn_target': 2.0}\n"
            "b = T.Backend(cfg)\n"
            "dev = b.devices()[0][0]\n"
            "b.learning(dev, False); b.speed(dev, False)\n"
            "print(json.dumps('torch._dynamo' in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "false"


def test_median_stable_needs_enough_repeats_and_a_still_median() -> None:
    cfg = dict(P.DEFAULTS)
    assert not P.median_stable(cfg, [100.0, 100.0, 100.0])  # fewer than speed_stable_after
    assert P.median_stable(cfg, [100.0, 101.0, 99.0, 100.5])
    assert not P.median_stable(cfg, [100.0, 150.0, 60.0, 200.0])  # one more repeat still moves it
    assert P.spread([100.0, 100.0, 100.0]) == 0.0
    assert P.spread([90.0, 100.0, 110.0]) == pytest.approx(0.2)  # (fastest - slowest) / median
    assert P.spread([]) is None


class _Events:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.got: list = []
        monkeypatch.setattr(P, "emit", self.got.append)


def _timed(monkeypatch: pytest.MonkeyPatch, step_times: list, **cfg_extra: object) -> tuple:
    """timed_training on a fake device whose steps take the given times (a clock we move)."""
    events = _Events(monkeypatch)
    now = [0.0]
    times = iter(step_times)
    last = [step_times[-1]]

    def step() -> float:
        try:
            last[0] = next(times)
        except StopIteration:
            pass
        now[0] += last[0]
        return 1.0

    monkeypatch.setattr(P.time, "perf_counter", lambda: now[0])
    cfg = dict(P.DEFAULTS, speed_batch=10, speed_repeat_s=0.1, **cfg_extra)
    rec = P.timed_training(cfg, {"id": "cpu", "kind": "cpu"}, step, lambda v: None, float, False)
    return rec, events.got


def test_repeats_stop_once_the_median_is_stable(monkeypatch: pytest.MonkeyPatch) -> None:
    rec, _ = _timed(monkeypatch, [0.01] * 400)
    assert rec["stopped"] == "stable" and rec["repeats"] == P.DEFAULTS["speed_stable_after"]
    assert rec["images_per_s"] == pytest.approx(1000.0) and rec["spread"] == 0.0


def test_a_noisy_device_gets_every_repeat(monkeypatch: pytest.MonkeyPatch) -> None:
    # each repeat is 10 steps; alternate fast and slow repeats so the median keeps moving
    pattern = [0.01] * 4 + sum(([t] * 10 for t in (0.01, 0.03, 0.01, 0.05, 0.02, 0.06, 0.015, 0.08)), [])
    rec, _ = _timed(monkeypatch, pattern)
    assert rec["repeats"] == P.DEFAULTS["speed_repeats"] and rec["stopped"] == "repeats"
    assert rec["spread"] > 0.2


def test_a_warm_up_step_paused_by_another_childs_timing_does_not_size_the_repeats(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    # the second step took 2 s (the child was paused while another one timed): the steps are 10 ms
    monkeypatch.setattr(P.sys, "stdin", io.StringIO("go\n"))
    rec, _ = _timed(monkeypatch, [0.01, 2.0] + [0.01] * 400, gated=True)
    assert rec["steps_per_repeat"] in (10, 11) and rec["stopped"] == "stable"  # not single steps, nor "budget"
    assert rec["warmup_steps"] == 2 + 1 + P.DEFAULTS["warmup_cpu"] - 1  # warmed up as a fast device
    assert rec["images_per_s"] == pytest.approx(1000.0)
    # ungated, a slow second step is a slow device: two steps of warm-up, no more
    rec, _ = _timed(monkeypatch, [2.0] * 40)
    assert rec["warmup_steps"] == 2 and rec["steps_per_repeat"] == 1


def test_gated_timed_loops_ask_first_and_say_when_done(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    monkeypatch.setattr(P.sys, "stdin", io.StringIO("go\n"))
    rec, events = _timed(monkeypatch, [0.01] * 400, gated=True)
    kinds = [(e["event"], e.get("on")) for e in events if e["event"] == "timing"]
    assert kinds == [("timing", True), ("timing", False)]
    first_on = next(i for i, e in enumerate(events) if e["event"] == "timing")
    repeats = [i for i, e in enumerate(events) if e["event"] == "tick" and "next_s" in e]
    assert repeats and all(first_on < i for i in repeats)
    assert P.sys.stdin.read() == ""  # it read the "go" line
