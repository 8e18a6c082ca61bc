# mypy: ignore-errors
# mlprobe verify payload. Runs in the TARGET interpreter as a child process:
#   python payload.py discover
#   python payload.py run '<json config>'
#   python payload.py opencl-loader NAME     (which ICD loader NAME is, and what it lists)
# Standard library + the framework under test only (numpy only where the framework itself needs it:
# TensorFlow, Keras/PlaidML, JAX). Python 3.7 compatible: no walrus, no positional-only parameters, no
# `from __future__ import annotations`, no typing at runtime.
#
# Protocol: one JSON object per line on the ORIGINAL stdout, each prefixed with MARK. The payload
# moves fd 1 onto stderr first, so whatever a framework prints (native code included) cannot corrupt
# the protocol. Events: hello, devices, stage (start), tick (progress inside a stage; also what keeps
# the runner's stall timer from calling a slow device hung), result (stage finished), device_done,
# done, fatal. The runner (mlprobe/verify/runner.py) turns them into verdicts; this file only measures.
import json
import math
import os
import platform
import random
import sys
import time
import traceback

MARK = "@@mlprobe-verify@@ "
PROTOCOL = 1

# Stated tolerances and targets (the runner may override them through the config).
DEFAULTS = {
    "seed": 1234,
    "loss_rtol": 5e-3,  # |loss_dev - loss_ref| <= loss_rtol * |loss_ref|
    "grad_rtol": 2e-2,  # ||g_dev - g_ref|| / ||g_ref|| over all gradients (TF32 on NVIDIA is ~1e-3)
    "correct_batch": 16,
    "learn_target": 0.90,  # held-out accuracy on the synthetic task (chance is 0.10)
    "learn_max_steps": 300,
    "learn_max_s": 30.0,
    "learn_batch": 64,
    "speed_batch": 128,
    "speed_repeats": 7,
    "speed_min_repeats": 3,
    "speed_repeat_s": 0.4,  # aim for at least this long per timed repeat (K steps, then sync)
    "speed_budget_s": 6.0,  # timed part of the speed test, per device (warm-up excluded)
    "warmup_cpu": 2,
    "warmup_accel": 5,
    "quick": False,
}

_proto = None


def emit(obj):
    obj["t"] = round(time.time(), 3)
    _proto.write(MARK + json.dumps(obj, default=str) + "\n")
    _proto.flush()


def open_channel():
    global _proto
    fd = os.dup(1)
    _proto = os.fdopen(fd, "w")
    sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout = sys.stderr


def short_error(exc):
    text = "%s: %s" % (type(exc).__name__, exc)
    text = " ".join(text.split())
    return text[:400]


def dist_version(*names):
    try:
        from importlib import metadata  # Python 3.8+
    except ImportError:
        metadata = None
    for name in names:
        if metadata is not None:
            try:
                return metadata.version(name)
            except Exception:
                pass
        # Python 3.7: scan sys.path for <name>-<version>.dist-info
        want = name.lower().replace("-", "_")
        for entry in sys.path:
            try:
                listing = os.listdir(entry or ".")
            except OSError:
                continue
            for fn in listing:
                if fn.endswith((".dist-info", ".egg-info")):
                    stem = fn.rsplit(".", 1)[0]
                    parts = stem.split("-")
                    if len(parts) >= 2 and parts[0].lower().replace("-", "_") == want:
                        return parts[1]
    return None


# ------------------------------------------------------------------ fault injection (tests only)

def inject(cfg, device, stage):
    """Act out the fault the tests asked for at this (device, stage). Returns True for 'nan'."""
    spec = cfg.get("inject") or {}
    if not spec:
        return False
    if spec.get("device", "*") not in ("*", device) or spec.get("stage") != stage:
        return False
    fault = spec.get("fault")
    if fault == "segv":
        if hasattr(os, "kill") and os.name != "nt":
            import signal
            os.kill(os.getpid(), signal.SIGSEGV)
        import ctypes
        ctypes.string_at(0)
    if fault == "hang":
        while True:
            time.sleep(3600)
    if fault == "raise":
        raise RuntimeError("injected fault (tests)")
    if fault == "exit":
        os._exit(3)
    if fault == "slow":
        time.sleep(float(spec.get("seconds", 5)))
    return fault == "nan"


# ------------------------------------------------------------------ shared data and statistics

def median(values):
    s = sorted(values)
    n = len(s)
    if not n:
        return None
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def finite(*values):
    for v in values:
        if v is None or not math.isfinite(v):
            return False
    return True


def correctness_batch(seed, n):
    """n images 28x28 (row-major, one channel) in [0, 1) and labels, from a seeded stdlib RNG."""
    rng = random.Random(seed)
    xs = [rng.random() for _ in range(n * 28 * 28)]
    ys = [rng.randrange(10) for _ in range(n)]
    return xs, ys


LEARN_SIZE = 16


def learning_data(seed, n):
    """A learnable image task: class c = a bright 2x2 square at one of ten places (5 columns x 2
    rows), jittered by one pixel, on uniform noise. Same bytes in every framework."""
    rng = random.Random(seed)
    s = LEARN_SIZE
    xs = [0.0] * (n * s * s)
    ys = []
    for i in range(n):
        base = i * s * s
        for p in range(s * s):
            xs[base + p] = rng.random() * 0.5
        c = rng.randrange(10)
        ys.append(c)
        r0 = (3 if c < 5 else 11) + rng.randint(-1, 1)
        c0 = 1 + 3 * (c % 5) + rng.randint(-1, 1)
        for dr in (0, 1):
            for dc in (0, 1):
                xs[base + (r0 + dr) * s + (c0 + dc)] = 0.6 + rng.random() * 0.4
    return xs, ys


def learning_batches(seed, n, batch):
    """Endless shuffled index batches, seeded."""
    rng = random.Random(seed)
    while True:
        idx = list(range(n))
        rng.shuffle(idx)
        for k in range(0, n - batch + 1, batch):
            yield idx[k:k + batch]


def peak_rss_bytes():
    try:
        import resource
        v = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(v) if sys.platform == "darwin" else int(v) * 1024
    except Exception:
        return None


def compare_grads(pairs):
    """pairs of (dev, ref) flat float lists -> (global relative L2 error, worst per-tensor one)."""
    num = den = 0.0
    worst = 0.0
    for dev, ref in pairs:
        d = sum((a - b) * (a - b) for a, b in zip(dev, ref))
        r = sum(b * b for b in ref)
        num += d
        den += r
        if r > 0:
            worst = max(worst, math.sqrt(d / r))
        elif d > 0:
            worst = float("inf")
    return (math.sqrt(num / den) if den > 0 else (0.0 if num == 0 else float("inf"))), worst


def correctness_record(cfg, loss_dev, loss_ref, rel, worst, precision=None):
    ok_nums = finite(loss_dev, loss_ref, rel)
    loss_err = abs(loss_dev - loss_ref) / max(abs(loss_ref), 1e-12) if ok_nums else None
    passed = bool(ok_nums and loss_err <= cfg["loss_rtol"] and rel <= cfg["grad_rtol"])
    rec = {
        "passed": passed,
        "loss": loss_dev if finite(loss_dev) else None,
        "loss_ref": loss_ref,
        "loss_rel_err": loss_err,
        "grad_rel_err": rel if finite(rel) else None,
        "grad_worst_tensor_rel_err": worst if finite(worst) else None,
        "nan": not ok_nums,
        "loss_rtol": cfg["loss_rtol"],
        "grad_rtol": cfg["grad_rtol"],
        "batch": cfg["correct_batch"],
        "reference": "CPU, float64, same weights and batch",
    }
    if precision:
        rec["precision"] = precision
    return rec


def speed_plan(cfg, step_s, accel):
    """(steps per repeat K, repeats R) from one timed step, inside the stated budget."""
    repeats = cfg["speed_repeats"]
    k = max(1, int(math.ceil(cfg["speed_repeat_s"] / max(step_s, 1e-6))))
    k = min(k, 500)
    while repeats > cfg["speed_min_repeats"] and repeats * k * step_s > cfg["speed_budget_s"]:
        repeats -= 1
    return k, repeats


def speed_record(cfg, samples, k, warmup, final_loss, nan):
    ips = median(samples)
    return {
        "images_per_s": ips,
        "seconds_per_epoch": (60000.0 / ips) if ips else None,
        "batch": cfg["speed_batch"],
        "warmup_steps": warmup,
        "steps_per_repeat": k,
        "repeats": len(samples),
        "samples_images_per_s": [round(s, 2) for s in samples],
        "final_loss": final_loss if finite(final_loss) else None,
        "nan": bool(nan or not finite(final_loss)),
        "model": "Keras-MNIST CNN: conv32-conv64-maxpool-dropout-dense128-dropout-dense10, 28x28x1",
        "optimizer": "Adadelta(lr=1.0, rho=0.95, eps=1e-7)",
    }


def run_device(cfg, backend, dev):
    """Correctness, learning, speed and proof for one device; each stage reports as it ends."""
    did = dev["id"]
    out = {"device": did}
    for stage in ("correctness", "learning", "speed"):
        emit({"event": "stage", "device": did, "stage": stage})
        t0 = time.time()
        try:
            nan = inject(cfg, did, stage)
            rec = getattr(backend, stage)(dev, nan)
        except Exception as exc:
            rec = {"error": short_error(exc), "traceback": traceback.format_exc()[-1500:]}
        rec["stage_s"] = round(time.time() - t0, 3)
        out[stage] = rec
        emit({"event": "result", "device": did, "stage": stage, "data": rec})
        if "error" in rec and stage == "correctness":
            break  # a device that cannot run one forward/backward pass will not train either
    try:
        out["proof"] = backend.proof(dev)
    except Exception as exc:
        out["proof"] = {"error": short_error(exc)}
    emit({"event": "device_done", "device": did, "data": out})
    return out


# ------------------------------------------------------------------ PyTorch

class TorchBackend(object):
    name = "torch"

    def __init__(self, cfg):
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        self.torch, self.nn, self.F, self.cfg = torch, nn, F, cfg
        self.version = getattr(torch, "__version__", None)
        self.dml = None

    def info(self):
        t = self.torch
        v = getattr(t, "version", None)
        return {"cuda": getattr(v, "cuda", None), "hip": getattr(v, "hip", None),
                "threads": t.get_num_threads()}

    def devices(self):
        t = self.torch
        found = [{"id": "cpu", "kind": "cpu", "name": "CPU (%d threads)" % t.get_num_threads(),
                  "api": "cpu"}]
        missing = []
        hip = getattr(t.version, "hip", None)
        cuda = getattr(t.version, "cuda", None)
        try:
            avail = t.cuda.is_available()
        except Exception as exc:
            avail = False
            missing.append({"id": "cuda", "reason": "torch.cuda.is_available() failed: " + short_error(exc)})
        if avail:
            for i in range(t.cuda.device_count()):
                props = t.cuda.get_device_properties(i)
                d = {"id": "cuda:%d" % i, "kind": "rocm" if hip else "cuda",
                     "name": t.cuda.get_device_name(i), "api": "hip" if hip else "cuda",
                     "total_memory_bytes": int(getattr(props, "total_memory", 0)) or None}
                if hip:
                    d["gfx_target"] = getattr(props, "gcnArchName", None)
                else:
                    d["compute_capability"] = "%d.%d" % t.cuda.get_device_capability(i)
                found.append(d)
        elif cuda or hip:
            missing.append({"id": "cuda", "kind": "rocm" if hip else "cuda",
                            "reason": "torch %s is built for %s %s but torch.cuda.is_available() is "
                                      "False: no usable GPU or driver" % (
                                          self.version, "ROCm/HIP" if hip else "CUDA", hip or cuda)})
        else:
            missing.append({"id": "cuda", "kind": "cuda", "quiet": True,
                            "reason": "torch %s is a CPU-only build (no CUDA or ROCm)" % self.version})
        mps = getattr(t.backends, "mps", None)
        if mps is not None and mps.is_available():
            found.append({"id": "mps", "kind": "mps", "name": "Apple GPU (Metal Performance Shaders)",
                          "api": "metal"})
        elif mps is not None and sys.platform == "darwin":
            missing.append({"id": "mps", "kind": "mps",
                            "reason": "MPS is %s in this torch but not available (needs macOS 12.3+ "
                                      "on Apple silicon or an AMD GPU)" % (
                                          "built" if mps.is_built() else "not built")})
        xpu = getattr(t, "xpu", None)
        try:
            xavail = xpu is not None and xpu.is_available()
        except Exception:
            xavail = False
        if xavail:
            for i in range(xpu.device_count()):
                found.append({"id": "xpu:%d" % i, "kind": "xpu", "name": xpu.get_device_name(i),
                              "api": "level-zero"})
        if _find_spec("torch_directml"):
            try:
                import torch_directml
                self.dml = torch_directml
                for i in range(torch_directml.device_count()):
                    found.append({"id": "dml:%d" % i, "kind": "directml",
                                  "name": torch_directml.device_name(i), "api": "directml"})
            except Exception as exc:
                missing.append({"id": "dml", "kind": "directml",
                                "reason": "torch_directml failed: " + short_error(exc)})
        return found, missing

    def _dev(self, dev):
        if dev["kind"] == "directml":
            return self.dml.device(int(dev["id"].split(":")[1]))
        return self.torch.device(dev["id"])

    def sync(self, dev, value=None):
        t = self.torch
        kind = dev["kind"]
        if kind in ("cuda", "rocm"):
            t.cuda.synchronize(self._dev(dev))
        elif kind == "mps":
            t.mps.synchronize()
        elif kind == "xpu":
            t.xpu.synchronize(self._dev(dev))
        elif kind == "directml" and value is not None:
            value.item()  # no synchronize API: reading a result back waits for the queue

    def mnist_cnn(self, dropout=True):
        nn = self.nn
        layers = [nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2)]
        if dropout:
            layers.append(nn.Dropout(0.25))
        layers += [nn.Flatten(), nn.Linear(9216, 128), nn.ReLU()]
        if dropout:
            layers.append(nn.Dropout(0.5))
        layers.append(nn.Linear(128, 10))
        return nn.Sequential(*layers)

    def correctness(self, dev, nan):
        import copy
        t, F, cfg = self.torch, self.F, self.cfg
        n = cfg["correct_batch"]
        t.manual_seed(cfg["seed"])
        base = self.mnist_cnn(dropout=False)
        xs, ys = correctness_batch(cfg["seed"], n)
        x = t.tensor(xs, dtype=t.float64).view(n, 1, 28, 28)
        y = t.tensor(ys, dtype=t.long)
        ref = copy.deepcopy(base).double()
        loss_ref = F.cross_entropy(ref(x), y)
        loss_ref.backward()
        d = self._dev(dev)
        model = copy.deepcopy(base).to(d)
        loss = F.cross_entropy(model(x.float().to(d)), y.to(d))
        loss.backward()
        self.sync(dev, loss)
        loss_dev = float(loss.item())
        if nan:
            loss_dev = float("nan")
        pairs = []
        for p_dev, p_ref in zip(model.parameters(), ref.parameters()):
            pairs.append((p_dev.grad.detach().to("cpu").double().flatten().tolist(),
                          p_ref.grad.detach().flatten().tolist()))
        rel, worst = compare_grads(pairs)
        precision = None
        if dev["kind"] == "cuda":
            precision = {"cudnn_allow_tf32": bool(t.backends.cudnn.allow_tf32),
                         "matmul_allow_tf32": bool(t.backends.cuda.matmul.allow_tf32)}
        rec = correctness_record(cfg, loss_dev, float(loss_ref.item()), rel, worst, precision)
        rec["tensor_device"] = str(loss.device)
        return rec

    def learning(self, dev, nan):
        t, nn, F, cfg = self.torch, self.nn, self.F, self.cfg
        s = LEARN_SIZE
        t.manual_seed(cfg["seed"] + 1)
        d = self._dev(dev)
        model = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(8 * 7 * 7, 10)).to(d)
        opt = t.optim.Adam(model.parameters(), lr=0.01)
        xs, ys = learning_data(cfg["seed"] + 2, 1024)
        xt, yt = learning_data(cfg["seed"] + 3, 512)
        x = t.tensor(xs, dtype=t.float32).view(-1, 1, s, s).to(d)
        y = t.tensor(ys, dtype=t.long).to(d)
        xte = t.tensor(xt, dtype=t.float32).view(-1, 1, s, s).to(d)
        yte = t.tensor(yt, dtype=t.long)

        def step(idx):
            ii = t.tensor(idx, dtype=t.long).to(d)
            opt.zero_grad()
            loss = F.cross_entropy(model(x[ii]), y[ii])
            loss.backward()
            opt.step()
            return loss

        def accuracy():
            with t.no_grad():
                pred = model(xte).argmax(1).to("cpu")
            return float((pred == yte).float().mean().item())

        # The learning model is tiny: on a busy CPU, waiting on a second thread costs more than it
        # gives (this stage proves learning; the speed stage uses the default threads).
        threads = t.get_num_threads()
        if dev["kind"] == "cpu":
            t.set_num_threads(1)
        try:
            return learn_loop(cfg, step, accuracy, lambda v: float(v.item()), nan)
        finally:
            t.set_num_threads(threads)

    def speed(self, dev, nan):
        t, F, cfg = self.torch, self.F, self.cfg
        b = cfg["speed_batch"]
        t.manual_seed(cfg["seed"] + 4)
        d = self._dev(dev)
        model = self.mnist_cnn().to(d)
        model.train()
        opt = t.optim.Adadelta(model.parameters(), lr=1.0, rho=0.95, eps=1e-7)
        x = t.rand(b, 1, 28, 28).to(d)
        y = t.randint(0, 10, (b,)).to(d)
        if dev["kind"] in ("cuda", "rocm"):
            t.cuda.reset_peak_memory_stats(d)
        elif dev["kind"] == "xpu" and hasattr(t.xpu, "reset_peak_memory_stats"):
            t.xpu.reset_peak_memory_stats(d)

        def step():
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        rec = timed_training(cfg, dev, step, lambda v: self.sync(dev, v), lambda v: float(v.item()), nan)
        self._last = (model, rec)
        return rec

    def proof(self, dev):
        t = self.torch
        out = {"device_name": dev.get("name")}
        model = getattr(self, "_last", (None, None))[0]
        if model is not None:
            out["tensor_device"] = str(next(model.parameters()).device)
        kind = dev["kind"]
        d = self._dev(dev)
        if kind in ("cuda", "rocm"):
            out["max_memory_allocated_bytes"] = int(t.cuda.max_memory_allocated(d))
            out["memory_allocated_bytes"] = int(t.cuda.memory_allocated(d))
            out["memory_source"] = "torch.cuda.max_memory_allocated"
            out["runtime"] = ("HIP " + str(t.version.hip)) if kind == "rocm" else ("CUDA " + str(t.version.cuda))
        elif kind == "mps":
            out["memory_allocated_bytes"] = int(t.mps.current_allocated_memory())
            out["driver_allocated_bytes"] = int(t.mps.driver_allocated_memory())
            out["memory_source"] = "torch.mps.current_allocated_memory"
        elif kind == "xpu":
            out["max_memory_allocated_bytes"] = int(t.xpu.max_memory_allocated(d))
            out["memory_source"] = "torch.xpu.max_memory_allocated"
        elif kind == "directml":
            out["memory_source"] = None
            out["note"] = "torch-directml reports no device memory counter"
        else:
            out["peak_rss_bytes"] = peak_rss_bytes()
            out["memory_source"] = "process peak RSS (host memory)"
        self._last = (None, None)
        return out


def learn_loop(cfg, step, accuracy, to_float, nan):
    """Train until held-out accuracy reaches the target, or the step/time limit. Evaluates every
    10 steps (evaluation time excluded from nothing: the clock is wall time, what a user waits)."""
    max_steps = cfg["learn_max_steps"]
    max_s = cfg["learn_max_s"]
    batches = learning_batches(cfg["seed"] + 5, 1024, cfg["learn_batch"])
    t0 = time.perf_counter()
    acc = None
    loss_v = None
    steps = 0
    history = []
    while steps < max_steps:
        loss = None
        for _ in range(10):
            loss = step(next(batches))
            steps += 1
        loss_v = float("nan") if nan else to_float(loss)
        acc = accuracy()
        history.append([steps, round(acc, 4)])
        emit({"event": "tick", "stage": "learning", "steps": steps, "accuracy": acc})
        if not finite(loss_v):
            break
        if acc >= cfg["learn_target"] or time.perf_counter() - t0 > max_s:
            break
    secs = time.perf_counter() - t0
    return {
        "passed": bool(finite(loss_v) and acc is not None and acc >= cfg["learn_target"]),
        "accuracy": acc,
        "target": cfg["learn_target"],
        "steps": steps,
        "seconds": round(secs, 3),
        "final_loss": loss_v if finite(loss_v) else None,
        "nan": not finite(loss_v),
        "history": history,
        "task": "synthetic 16x16 images, 10 classes (square position), 1024 train / 512 held out",
        "model": "conv8-maxpool-dense10, Adam(lr=0.01), batch %d" % cfg["learn_batch"],
    }


def timed_training(cfg, dev, step, sync, to_float, nan):
    accel = dev["kind"] != "cpu"
    warm = 1 if cfg["quick"] else (cfg["warmup_accel"] if accel else cfg["warmup_cpu"])
    v = step()  # first step: kernel selection, compilation, allocations
    sync(v)
    t_first = time.perf_counter()
    emit({"event": "tick", "stage": "speed", "phase": "warm-up"})
    v = step()
    sync(v)
    step_s = time.perf_counter() - t_first
    untimed = 2
    if step_s < 1.0:  # a slow device (seconds per step) is warm after two steps; don't pay more
        for _ in range(warm - 1):
            v = step()
        sync(v)
        t0 = time.perf_counter()
        v = step()
        sync(v)
        step_s = time.perf_counter() - t0
        untimed += warm
    k, repeats = speed_plan(cfg, step_s, accel)
    samples = []
    b = cfg["speed_batch"]
    for _ in range(repeats):
        # next_s: how long until the next line, so the runner does not take a slow device for a hung one
        emit({"event": "tick", "stage": "speed", "repeat": len(samples), "of": repeats,
              "next_s": round(k * step_s, 3)})
        t0 = time.perf_counter()
        for _ in range(k):
            v = step()
        sync(v)
        samples.append(k * b / (time.perf_counter() - t0))
    emit({"event": "tick", "stage": "speed", "repeat": len(samples), "of": repeats})
    final = float("nan") if nan else to_float(v)
    return speed_record(cfg, samples, k, untimed, final, nan)


def _find_spec(name):
    try:
        import importlib.util
        return importlib.util.find_spec(name) is not None
    except Exception:
        return False


# ------------------------------------------------------------------ TensorFlow (raw ops, no Keras)

class TFBackend(object):
    name = "tensorflow"

    def __init__(self, cfg):
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import numpy as np
        import tensorflow as tf
        self.tf, self.np, self.cfg = tf, np, cfg
        self.version = getattr(tf, "__version__", None)
        self._last = None
        if self.version and self.version.split(".")[0] in ("0", "1"):
            raise RuntimeError("TensorFlow %s is 1.x: verify needs TensorFlow 2 (eager mode)" % self.version)
        for gpu in tf.config.list_physical_devices("GPU"):
            try:
                tf.config.experimental.set_memory_growth(gpu, True)
            except Exception:
                pass

    def info(self):
        tf = self.tf
        out = {}
        try:
            out["built_with_cuda"] = bool(tf.test.is_built_with_cuda())
            out["built_with_rocm"] = bool(tf.test.is_built_with_rocm())
        except Exception:
            pass
        return out

    def devices(self):
        tf = self.tf
        found = [{"id": "cpu", "kind": "cpu", "name": "CPU", "api": "cpu", "tf_name": "/CPU:0"}]
        missing = []
        counts = {}
        metal = _find_spec("tensorflow_metal") or dist_version("tensorflow-metal") is not None
        dml = dist_version("tensorflow-directml-plugin") is not None
        for pd in tf.config.list_physical_devices():
            typ = pd.device_type
            if typ == "CPU":
                continue
            i = counts.get(typ, 0)
            counts[typ] = i + 1
            try:
                details = tf.config.experimental.get_device_details(pd) or {}
            except Exception:
                details = {}
            if typ == "GPU":
                if metal and sys.platform == "darwin":
                    kind, api = "metal", "metal"
                elif dml:
                    kind, api = "directml", "directml"
                elif self.info().get("built_with_rocm"):
                    kind, api = "rocm", "hip"
                else:
                    kind, api = "cuda", "cuda"
            elif typ == "DML":
                kind, api = "directml", "directml"
            else:
                kind, api = typ.lower(), typ.lower()
            d = {"id": "%s:%d" % (typ.lower(), i), "kind": kind, "api": api, "tf_name": "/%s:%d" % (typ, i),
                 "name": details.get("device_name") or pd.name}
            if details.get("compute_capability"):
                d["compute_capability"] = "%d.%d" % tuple(details["compute_capability"])
            found.append(d)
        if len(found) == 1:
            info = self.info()
            if info.get("built_with_cuda") or info.get("built_with_rocm"):
                missing.append({"id": "gpu", "kind": "cuda" if info.get("built_with_cuda") else "rocm",
                                "reason": "TensorFlow %s is built with GPU support but sees no GPU" % self.version})
            else:
                missing.append({"id": "gpu", "quiet": True,
                                "reason": "TensorFlow %s has no GPU device here (CPU build, no plugin)" % self.version})
        return found, missing

    # raw parameters: kernel HWIO, bias, dense (in, out)
    def init_params(self, seed, dtype, shapes):
        np = self.np
        rng = np.random.RandomState(seed)
        out = []
        for shape in shapes:
            if len(shape) == 1:
                out.append(np.zeros(shape, dtype=dtype))
                continue
            if len(shape) == 4:
                fan_in, fan_out = shape[0] * shape[1] * shape[2], shape[0] * shape[1] * shape[3]
            else:
                fan_in, fan_out = shape
            lim = math.sqrt(6.0 / (fan_in + fan_out))
            out.append(rng.uniform(-lim, lim, size=shape).astype(dtype))
        return out

    CNN_SHAPES = [(3, 3, 1, 32), (32,), (3, 3, 32, 64), (64,), (9216, 128), (128,), (128, 10), (10,)]

    def cnn_logits(self, p, x, training):
        tf = self.tf
        h = tf.nn.relu(tf.nn.conv2d(x, p[0], 1, "VALID") + p[1])
        h = tf.nn.relu(tf.nn.conv2d(h, p[2], 1, "VALID") + p[3])
        h = tf.nn.max_pool2d(h, 2, 2, "VALID")
        if training:
            h = tf.nn.dropout(h, rate=0.25)
        h = tf.reshape(h, [-1, 9216])
        h = tf.nn.relu(tf.matmul(h, p[4]) + p[5])
        if training:
            h = tf.nn.dropout(h, rate=0.5)
        return tf.matmul(h, p[6]) + p[7]

    def loss(self, logits, y):
        tf = self.tf
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))

    def correctness(self, dev, nan):
        tf, np, cfg = self.tf, self.np, self.cfg
        n = cfg["correct_batch"]
        w32 = self.init_params(cfg["seed"], np.float32, self.CNN_SHAPES)
        xs, ys = correctness_batch(cfg["seed"], n)
        x = np.array(xs, dtype=np.float32).reshape(n, 28, 28, 1)
        y = np.array(ys, dtype=np.int32)

        def run(device, dtype):
            with tf.device(device):
                p = [tf.Variable(w.astype(dtype)) for w in w32]
                with tf.GradientTape() as tape:
                    loss = self.loss(self.cnn_logits(p, tf.constant(x.astype(dtype)), False), tf.constant(y))
                grads = tape.gradient(loss, p)
            return loss, grads, p

        loss_ref, g_ref, _ = run("/CPU:0", np.float64)
        loss, g, p = run(dev["tf_name"], np.float32)
        loss_dev = float("nan") if nan else float(loss.numpy())
        pairs = [(a.numpy().astype(np.float64).ravel().tolist(), b.numpy().ravel().tolist())
                 for a, b in zip(g, g_ref)]
        rel, worst = compare_grads(pairs)
        rec = correctness_record(cfg, loss_dev, float(loss_ref.numpy()), rel, worst)
        rec["tensor_device"] = p[0].device
        return rec

    def learning(self, dev, nan):
        tf, np, cfg = self.tf, self.np, self.cfg
        s = LEARN_SIZE
        shapes = [(3, 3, 1, 8), (8,), (8 * 7 * 7, 10), (10,)]
        w = self.init_params(cfg["seed"] + 1, np.float32, shapes)
        xs, ys = learning_data(cfg["seed"] + 2, 1024)
        xt, yt = learning_data(cfg["seed"] + 3, 512)
        with tf.device(dev["tf_name"]):
            p = [tf.Variable(a) for a in w]
            m = [tf.Variable(tf.zeros_like(a)) for a in w]
            v = [tf.Variable(tf.zeros_like(a)) for a in w]
            it = tf.Variable(0.0)
            x = tf.constant(np.array(xs, dtype=np.float32).reshape(-1, s, s, 1))
            y = tf.constant(np.array(ys, dtype=np.int32))
            xte = tf.constant(np.array(xt, dtype=np.float32).reshape(-1, s, s, 1))
        yte = np.array(yt)

        def logits(inp):
            h = tf.nn.relu(tf.nn.conv2d(inp, p[0], 1, "VALID") + p[1])
            h = tf.nn.max_pool2d(h, 2, 2, "VALID")
            return tf.matmul(tf.reshape(h, [-1, 8 * 7 * 7]), p[2]) + p[3]

        @tf.function
        def train(idx):
            with tf.GradientTape() as tape:
                loss = self.loss(logits(tf.gather(x, idx)), tf.gather(y, idx))
            grads = tape.gradient(loss, p)
            it.assign_add(1.0)
            lr = 0.01 * tf.sqrt(1.0 - 0.999 ** it) / (1.0 - 0.9 ** it)
            for pi, gi, mi, vi in zip(p, grads, m, v):
                mi.assign(0.9 * mi + 0.1 * gi)
                vi.assign(0.999 * vi + 0.001 * gi * gi)
                pi.assign_sub(lr * mi / (tf.sqrt(vi) + 1e-8))
            return loss

        def step(idx):
            with tf.device(dev["tf_name"]):
                return train(tf.constant(idx, dtype=tf.int32))

        def accuracy():
            with tf.device(dev["tf_name"]):
                pred = tf.argmax(logits(xte), axis=1).numpy()
            return float((pred == yte).mean())

        return learn_loop(cfg, step, accuracy, lambda val: float(val.numpy()), nan)

    def speed(self, dev, nan):
        tf, np, cfg = self.tf, self.np, self.cfg
        b = cfg["speed_batch"]
        w = self.init_params(cfg["seed"] + 4, np.float32, self.CNN_SHAPES)
        rng = np.random.RandomState(cfg["seed"] + 5)
        rho, eps, lr = 0.95, 1e-7, 1.0
        name = dev["tf_name"]
        with tf.device(name):
            p = [tf.Variable(a) for a in w]
            acc_g = [tf.Variable(tf.zeros_like(a)) for a in w]
            acc_u = [tf.Variable(tf.zeros_like(a)) for a in w]
            x = tf.constant(rng.rand(b, 28, 28, 1).astype(np.float32))
            y = tf.constant(rng.randint(0, 10, size=(b,)).astype(np.int32))
        if dev["kind"] != "cpu":
            try:
                tf.config.experimental.reset_memory_stats(name.strip("/"))
            except Exception:
                pass

        @tf.function
        def train():
            with tf.GradientTape() as tape:
                loss = self.loss(self.cnn_logits(p, x, True), y)
            grads = tape.gradient(loss, p)
            for pi, gi, ag, au in zip(p, grads, acc_g, acc_u):
                ag.assign(rho * ag + (1 - rho) * gi * gi)
                upd = tf.sqrt(au + eps) / tf.sqrt(ag + eps) * gi
                au.assign(rho * au + (1 - rho) * upd * upd)
                pi.assign_sub(lr * upd)
            return loss

        def step():
            with tf.device(name):
                return train()

        rec = timed_training(cfg, dev, step, lambda v: v.numpy(), lambda v: float(v.numpy()), nan)
        self._last = p
        return rec

    def proof(self, dev):
        out = {"device_name": dev.get("name")}
        if self._last is not None:
            out["tensor_device"] = self._last[0].device
        if dev["kind"] == "cpu":
            out["peak_rss_bytes"] = peak_rss_bytes()
            out["memory_source"] = "process peak RSS (host memory)"
        else:
            try:
                info = self.tf.config.experimental.get_memory_info(dev["tf_name"].strip("/"))
                out["max_memory_allocated_bytes"] = int(info.get("peak", 0))
                out["memory_allocated_bytes"] = int(info.get("current", 0))
                out["memory_source"] = "tf.config.experimental.get_memory_info"
            except Exception as exc:
                out["memory_source"] = None
                out["note"] = "no device memory counter: " + short_error(exc)
        self._last = None
        return out


# ------------------------------------------------------------------ PlaidML + Keras 2.2.4

def np_cnn_loss_grads(np, weights, x, y, clip=1e-7):
    """Float64 reference of the Keras-MNIST CNN without dropout: NHWC, kernels HWIO, dense (in, out),
    softmax + categorical cross-entropy (Keras clips probabilities to [clip, 1 - clip]).
    Returns (loss, [grad per weight])."""
    k1, b1, k2, b2, w3, b3, w4, b4 = [np.asarray(w, dtype=np.float64) for w in weights]
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[0]

    def conv(inp, k):
        kh, kw, _, co = k.shape
        oh, ow = inp.shape[1] - kh + 1, inp.shape[2] - kw + 1
        out = np.zeros((inp.shape[0], oh, ow, co))
        for i in range(kh):
            for j in range(kw):
                out += inp[:, i:i + oh, j:j + ow, :].dot(k[i, j])
        return out

    def conv_back(inp, k, dout):
        kh, kw = k.shape[0], k.shape[1]
        oh, ow = dout.shape[1], dout.shape[2]
        dk = np.zeros_like(k)
        dx = np.zeros_like(inp)
        for i in range(kh):
            for j in range(kw):
                sl = inp[:, i:i + oh, j:j + ow, :]
                dk[i, j] = np.tensordot(sl, dout, axes=([0, 1, 2], [0, 1, 2]))
                dx[:, i:i + oh, j:j + ow, :] += dout.dot(k[i, j].T)
        return dx, dk

    z1 = conv(x, k1) + b1
    a1 = np.maximum(z1, 0)
    z2 = conv(a1, k2) + b2
    a2 = np.maximum(z2, 0)
    _, h, w, c = a2.shape
    a2r = a2.reshape(n, h // 2, 2, w // 2, 2, c)
    pooled = a2r.max(axis=(2, 4))
    mask = (a2r == pooled[:, :, None, :, None, :])
    f = pooled.reshape(n, -1)
    z3 = f.dot(w3) + b3
    a3 = np.maximum(z3, 0)
    logits = a3.dot(w4) + b4
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    prob = e / e.sum(axis=1, keepdims=True)
    onehot = np.zeros_like(prob)
    onehot[np.arange(n), y] = 1.0
    loss = float(np.mean(-np.log(np.clip(prob[np.arange(n), y], clip, 1 - clip))))
    dl = (prob - onehot) / n
    dw4 = a3.T.dot(dl)
    db4 = dl.sum(axis=0)
    dz3 = dl.dot(w4.T) * (z3 > 0)
    dw3 = f.T.dot(dz3)
    db3 = dz3.sum(axis=0)
    dp = dz3.dot(w3.T).reshape(pooled.shape)
    da2 = (mask * dp[:, :, None, :, None, :]).reshape(a2.shape)
    dz2 = da2 * (z2 > 0)
    db2 = dz2.sum(axis=(0, 1, 2))
    da1, dk2 = conv_back(a1, k2, dz2)
    dz1 = da1 * (z1 > 0)
    db1 = dz1.sum(axis=(0, 1, 2))
    _, dk1 = conv_back(x, k1, dz1)
    return loss, [dk1, db1, dk2, db2, dw3, db3, dw4, db4]


class PlaidMLBackend(object):
    """One PlaidML device per process: PlaidML opens the device named by PLAIDML_DEVICE_IDS once."""
    name = "plaidml"

    def __init__(self, cfg):
        import numpy as np
        import plaidml
        self.np, self.plaidml, self.cfg = np, plaidml, cfg
        self.version = dist_version("plaidml")
        self.keras = None
        self.K = None
        self._last = None

    def info(self):
        return {"keras": dist_version("keras", "Keras"), "plaidml_keras": dist_version("plaidml-keras"),
                "experimental": os.environ.get("PLAIDML_EXPERIMENTAL")}

    def devices(self):
        pm = self.plaidml
        ctx = pm.Context()
        valid, invalid = pm.devices(ctx, limit=100, return_all=True)
        found, missing = [], []
        for d in valid:
            did = d.id.decode() if isinstance(d.id, bytes) else str(d.id)
            desc = d.description.decode() if isinstance(d.description, bytes) else str(d.description)
            cpu = did.startswith("llvm_cpu") or "cpu" in did.lower() or "CPU" in desc
            api = did.split("_", 1)[0] if "_" in did else "plaidml"
            found.append({"id": did, "kind": "cpu" if cpu else ("metal" if api == "metal" else "gpu"),
                          "name": desc or did, "api": "llvm" if api == "llvm" else api})
        for d in invalid:
            did = d.id.decode() if isinstance(d.id, bytes) else str(d.id)
            missing.append({"id": did, "reason": "PlaidML lists this device as unsupported (no configuration for it)"})
        found.sort(key=lambda r: r["kind"] != "cpu")
        return found, missing

    def open(self, device_id):
        os.environ["PLAIDML_DEVICE_IDS"] = device_id
        import plaidml.keras
        plaidml.keras.install_backend()
        import keras
        import keras.backend as K
        self.keras, self.K = keras, K

    def mnist_cnn(self, dropout=True):
        L = self.keras.layers
        layers = [L.Conv2D(32, (3, 3), activation="relu", input_shape=(28, 28, 1)),
                  L.Conv2D(64, (3, 3), activation="relu"), L.MaxPooling2D((2, 2))]
        if dropout:
            layers.append(L.Dropout(0.25))
        layers += [L.Flatten(), L.Dense(128, activation="relu")]
        if dropout:
            layers.append(L.Dropout(0.5))
        layers.append(L.Dense(10, activation="softmax"))
        return self.keras.models.Sequential(layers)

    def correctness(self, dev, nan):
        np, K, cfg = self.np, self.K, self.cfg
        n = cfg["correct_batch"]
        np.random.seed(cfg["seed"])
        model = self.mnist_cnn(dropout=False)
        xs, ys = correctness_batch(cfg["seed"], n)
        x = np.array(xs, dtype=np.float32).reshape(n, 28, 28, 1)
        y = np.array(ys)
        onehot = np.eye(10, dtype=np.float32)[y]
        target = K.placeholder(shape=(None, 10))
        loss_t = K.mean(K.categorical_crossentropy(target, model.output))
        grads_t = K.gradients(loss_t, model.trainable_weights)
        fn = K.function([model.input, target], [loss_t] + list(grads_t))
        outs = fn([x, onehot])
        loss_ref, g_ref = np_cnn_loss_grads(np, model.get_weights(), x, y)
        loss_dev = float("nan") if nan else float(outs[0])
        pairs = [(np.asarray(a, dtype=np.float64).ravel().tolist(), b.ravel().tolist())
                 for a, b in zip(outs[1:], g_ref)]
        rel, worst = compare_grads(pairs)
        rec = correctness_record(cfg, loss_dev, loss_ref, rel, worst)
        rec["reference"] = "numpy float64 on the CPU, same weights and batch"
        return rec

    def learning(self, dev, nan):
        np, keras, cfg = self.np, self.keras, self.cfg
        L = keras.layers
        s = LEARN_SIZE
        np.random.seed(cfg["seed"] + 1)
        model = keras.models.Sequential([
            L.Conv2D(8, (3, 3), activation="relu", input_shape=(s, s, 1)), L.MaxPooling2D((2, 2)),
            L.Flatten(), L.Dense(10, activation="softmax")])
        model.compile(loss="sparse_categorical_crossentropy", optimizer=keras.optimizers.Adam(lr=0.01))
        xs, ys = learning_data(cfg["seed"] + 2, 1024)
        xt, yt = learning_data(cfg["seed"] + 3, 512)
        x = np.array(xs, dtype=np.float32).reshape(-1, s, s, 1)
        y = np.array(ys, dtype=np.float32).reshape(-1, 1)
        xte = np.array(xt, dtype=np.float32).reshape(-1, s, s, 1)
        yte = np.array(yt)

        def step(idx):
            return model.train_on_batch(x[idx], y[idx])

        def accuracy():
            pred = model.predict(xte, batch_size=512).argmax(axis=1)
            return float((pred == yte).mean())

        def to_float(v):
            return float(np.asarray(v).ravel()[0])

        return learn_loop(cfg, step, accuracy, to_float, nan)

    def speed(self, dev, nan):
        np, keras, cfg = self.np, self.keras, self.cfg
        b = cfg["speed_batch"]
        np.random.seed(cfg["seed"] + 4)
        model = self.mnist_cnn()
        model.compile(loss="categorical_crossentropy",
                      optimizer=keras.optimizers.Adadelta(lr=1.0, rho=0.95, epsilon=1e-7))
        x = np.random.rand(b, 28, 28, 1).astype(np.float32)
        y = np.eye(10, dtype=np.float32)[np.random.randint(0, 10, size=b)]

        def step():
            return model.train_on_batch(x, y)  # returns host numbers: it has waited for the device

        def to_float(v):
            return float(np.asarray(v).ravel()[0])

        self._last = True
        return timed_training(cfg, dev, step, lambda v: None, to_float, nan)

    def proof(self, dev):
        out = {"device_name": dev.get("name"), "memory_source": None,
               "note": "PlaidML reports no device memory counter"}
        try:
            import plaidml.settings as ps
            out["tensor_device"] = " ".join(ps.device_ids) or None
        except Exception:
            pass
        out["keras_backend"] = self.K.backend() if self.K is not None else None
        return out


# ------------------------------------------------------------------ JAX

class JaxBackend(object):
    """JAX on its CPU device and on whatever accelerator its plugins give (CUDA, ROCm, Metal). The
    same CNN, data and optimizers as the TensorFlow backend, written with jax.numpy and jax.lax;
    every step is jit-compiled for the device its (committed) inputs live on."""
    name = "jax"
    PLUGINS = ("jax-cuda13-plugin", "jax-cuda12-plugin", "jax-rocm7-plugin", "jax-rocm60-plugin", "jax-metal")

    def __init__(self, cfg):
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import numpy as np
        import jax
        import jax.numpy as jnp
        # float64 for the CPU reference (the device computes in float32: every array is typed)
        jax.config.update("jax_enable_x64", True)
        self.jax, self.jnp, self.np, self.cfg = jax, jnp, np, cfg
        self.version = getattr(jax, "__version__", None)
        self.cpu = jax.devices("cpu")[0]
        self._devs = {"cpu": self.cpu}
        self._last = None

    def info(self):
        out = {"jaxlib": dist_version("jaxlib"), "default_backend": None, "plugins": {}}
        for name in self.PLUGINS:
            v = dist_version(name)
            if v:
                out["plugins"][name] = v
        try:
            out["default_backend"] = self.jax.default_backend()
        except Exception as exc:
            out["default_backend_error"] = short_error(exc)
        return out

    @staticmethod
    def _kind(d):
        cls = type(d).__name__.lower()
        platform = str(getattr(d, "platform", "")).lower()
        if "cuda" in cls:
            return "cuda", "cuda"
        if "rocm" in cls:
            return "rocm", "hip"
        if platform == "metal":
            return "metal", "metal"
        raw = str(getattr(getattr(d, "client", None), "_raw_platform", "") or "").lower()
        if raw in ("cuda", "rocm"):
            return raw, "cuda" if raw == "cuda" else "hip"
        return platform or "gpu", platform or "gpu"

    def devices(self):
        jax = self.jax
        found = [{"id": "cpu", "kind": "cpu", "name": "CPU (XLA)", "api": "cpu"}]
        missing = []
        try:
            accel = [d for d in jax.devices() if str(d.platform).lower() != "cpu"]
        except Exception as exc:
            accel = []
            missing.append({"id": "gpu", "reason": "jax could not start its default backend: " + short_error(exc)})
        counts = {}
        for d in accel:
            kind, api = self._kind(d)
            i = counts.get(kind, 0)
            counts[kind] = i + 1
            did = "%s:%d" % (kind, i)
            self._devs[did] = d
            found.append({"id": did, "kind": kind, "api": api,
                          "name": str(getattr(d, "device_kind", "") or d)})
        if len(found) == 1 and not missing:
            plugins = self.info().get("plugins") or {}
            if plugins:
                kind = "rocm" if any("rocm" in p for p in plugins) else "metal" if "jax-metal" in plugins else "cuda"
                missing.append({"id": "gpu", "kind": kind,
                                "reason": "jax %s has %s installed but sees no GPU (it runs on the CPU)"
                                          % (self.version, ", ".join(sorted(plugins)))})
            else:
                missing.append({"id": "gpu", "quiet": True,
                                "reason": "jax %s has no GPU plugin here (CPU only)" % self.version})
        return found, missing

    def init_params(self, seed, dtype, shapes):
        return TFBackend.init_params(self, seed, dtype, shapes)

    CNN_SHAPES = TFBackend.CNN_SHAPES

    def _conv(self, x, k):
        return self.jax.lax.conv_general_dilated(x, k, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def _pool(self, h):
        return self.jax.lax.reduce_window(h, -self.jnp.inf, self.jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    def cnn_logits(self, p, x, key=None):
        jax, jnp = self.jax, self.jnp
        h = jax.nn.relu(self._conv(x, p[0]) + p[1])
        h = jax.nn.relu(self._conv(h, p[2]) + p[3])
        h = self._pool(h)
        if key is not None:
            k1, key = jax.random.split(key)
            h = jnp.where(jax.random.bernoulli(k1, 0.75, h.shape), h / 0.75, 0.0)
        h = h.reshape((h.shape[0], 9216))
        h = jax.nn.relu(h @ p[4] + p[5])
        if key is not None:
            h = jnp.where(jax.random.bernoulli(key, 0.5, h.shape), h / 0.5, 0.0)
        return h @ p[6] + p[7]

    def loss(self, logits, y):
        jax, jnp = self.jax, self.jnp
        logp = jax.nn.log_softmax(logits)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    def _put(self, value, dev):
        return self.jax.device_put(value, self._devs[dev["id"]] if isinstance(dev, dict) else dev)

    def correctness(self, dev, nan):
        jax, np, cfg = self.jax, self.np, self.cfg
        n = cfg["correct_batch"]
        w32 = self.init_params(cfg["seed"], np.float32, self.CNN_SHAPES)
        xs, ys = correctness_batch(cfg["seed"], n)
        x = np.array(xs, dtype=np.float32).reshape(n, 28, 28, 1)
        y = np.array(ys, dtype=np.int32)

        def f(p, xb, yb):
            return self.loss(self.cnn_logits(p, xb), yb)

        grad = jax.jit(jax.value_and_grad(f))
        ref_p = [self._put(w.astype(np.float64), self.cpu) for w in w32]
        loss_ref, g_ref = grad(ref_p, self._put(x.astype(np.float64), self.cpu), self._put(y, self.cpu))
        p = [self._put(w, dev) for w in w32]
        loss, g = grad(p, self._put(x, dev), self._put(y, dev))
        loss_dev = float("nan") if nan else float(loss)
        pairs = [(np.asarray(a, dtype=np.float64).ravel().tolist(), np.asarray(b).ravel().tolist())
                 for a, b in zip(g, g_ref)]
        rel, worst = compare_grads(pairs)
        rec = correctness_record(cfg, loss_dev, float(loss_ref), rel, worst)
        rec["tensor_device"] = _array_device(loss)
        return rec

    def learning(self, dev, nan):
        jax, jnp, np, cfg = self.jax, self.jnp, self.np, self.cfg
        s = LEARN_SIZE
        shapes = [(3, 3, 1, 8), (8,), (8 * 7 * 7, 10), (10,)]
        w = self.init_params(cfg["seed"] + 1, np.float32, shapes)
        xs, ys = learning_data(cfg["seed"] + 2, 1024)
        xt, yt = learning_data(cfg["seed"] + 3, 512)
        x = self._put(np.array(xs, dtype=np.float32).reshape(-1, s, s, 1), dev)
        y = self._put(np.array(ys, dtype=np.int32), dev)
        xte = self._put(np.array(xt, dtype=np.float32).reshape(-1, s, s, 1), dev)
        yte = np.array(yt)

        def logits(p, inp):
            h = jax.nn.relu(self._conv(inp, p[0]) + p[1])
            h = self._pool(h)
            return h.reshape((h.shape[0], 8 * 7 * 7)) @ p[2] + p[3]

        def f(p, idx):
            return self.loss(logits(p, x[idx]), y[idx])

        @jax.jit
        def train(state, idx):
            p, m, v, it = state
            loss, g = jax.value_and_grad(f)(p, idx)
            it = it + 1.0
            lr = 0.01 * jnp.sqrt(1.0 - 0.999 ** it) / (1.0 - 0.9 ** it)
            m = [0.9 * mi + 0.1 * gi for mi, gi in zip(m, g)]
            v = [0.999 * vi + 0.001 * gi * gi for vi, gi in zip(v, g)]
            p = [pi - lr * mi / (jnp.sqrt(vi) + 1e-8) for pi, mi, vi in zip(p, m, v)]
            return (p, m, v, it), loss

        predict = jax.jit(lambda p: jnp.argmax(logits(p, xte), axis=1))
        zeros = [self._put(np.zeros_like(a), dev) for a in w]
        box = [([self._put(a, dev) for a in w], zeros, list(zeros), self._put(np.float32(0.0), dev))]

        def step(idx):
            box[0], loss = train(box[0], self._put(np.array(idx, dtype=np.int32), dev))
            return loss

        def accuracy():
            return float((np.asarray(predict(box[0][0])) == yte).mean())

        return learn_loop(cfg, step, accuracy, lambda val: float(val), nan)

    def speed(self, dev, nan):
        jax, jnp, np, cfg = self.jax, self.jnp, self.np, self.cfg
        b = cfg["speed_batch"]
        w = self.init_params(cfg["seed"] + 4, np.float32, self.CNN_SHAPES)
        rng = np.random.RandomState(cfg["seed"] + 5)
        rho, eps, lr = 0.95, 1e-7, 1.0
        x = self._put(rng.rand(b, 28, 28, 1).astype(np.float32), dev)
        y = self._put(rng.randint(0, 10, size=(b,)).astype(np.int32), dev)
        base_key = self._put(jax.random.PRNGKey(cfg["seed"] + 6), dev)

        def f(p, key):
            return self.loss(self.cnn_logits(p, x, key), y)

        @jax.jit
        def train(state):
            p, ag, au, i = state
            loss, g = jax.value_and_grad(f)(p, jax.random.fold_in(base_key, i))
            ag = [rho * a + (1 - rho) * gi * gi for a, gi in zip(ag, g)]
            upd = [jnp.sqrt(u + eps) / jnp.sqrt(a + eps) * gi for u, a, gi in zip(au, ag, g)]
            au = [rho * u + (1 - rho) * d * d for u, d in zip(au, upd)]
            p = [pi - lr * d for pi, d in zip(p, upd)]
            return (p, ag, au, i + 1), loss

        zeros = [self._put(np.zeros_like(a), dev) for a in w]
        box = [([self._put(a, dev) for a in w], zeros, list(zeros), self._put(np.int32(0), dev))]

        def step():
            box[0], loss = train(box[0])
            return loss

        rec = timed_training(cfg, dev, step, lambda v: v.block_until_ready(), lambda v: float(v), nan)
        self._last = box[0][0]
        return rec

    def proof(self, dev):
        out = {"device_name": dev.get("name")}
        if self._last is not None:
            out["tensor_device"] = _array_device(self._last[0])
        if dev["kind"] == "cpu":
            out["peak_rss_bytes"] = peak_rss_bytes()
            out["memory_source"] = "process peak RSS (host memory)"
        else:
            try:
                stats = self._devs[dev["id"]].memory_stats() or {}
                out["max_memory_allocated_bytes"] = int(stats.get("peak_bytes_in_use", 0))
                out["memory_allocated_bytes"] = int(stats.get("bytes_in_use", 0))
                out["memory_source"] = "jax Device.memory_stats()"
            except Exception as exc:
                out["memory_source"] = None
                out["note"] = "no device memory counter: " + short_error(exc)
        self._last = None
        return out


def _array_device(arr):
    """The device a jax array lives on, as text (jax >= 0.4.27: .devices(); older: .device())."""
    try:
        devs = arr.devices()
        return ", ".join(sorted(str(d) for d in devs))
    except Exception:
        try:
            return str(arr.device())
        except Exception:
            return None


BACKENDS = {"torch": TorchBackend, "tensorflow": TFBackend, "plaidml": PlaidMLBackend, "jax": JaxBackend}


# ------------------------------------------------------------------ modes

def mode_discover():
    names = {
        "torch": ["torch"], "tensorflow": ["tensorflow"], "plaidml": ["plaidml", "keras"],
        "torch_directml": ["torch_directml"], "keras": ["keras"], "numpy": ["numpy"], "jax": ["jax", "jaxlib"],
    }
    dists = {
        "torch": ("torch",), "tensorflow": ("tensorflow", "tensorflow-cpu", "tensorflow-macos",
                                            "tensorflow-intel", "tensorflow-gpu", "tensorflow-rocm"),
        "plaidml": ("plaidml-keras",), "torch_directml": ("torch-directml",), "keras": ("keras", "Keras"),
        "numpy": ("numpy",), "jax": ("jax",),
    }
    found = {}
    for key, mods in names.items():
        ok = all(_find_spec(m) for m in mods)
        rec = {"importable": ok, "version": dist_version(*dists[key]) if ok else None}
        if key == "plaidml":
            rec["plaidml_version"] = dist_version("plaidml") if ok else None
            rec["keras_version"] = dist_version("keras", "Keras") if ok else None
            rec["shim"] = _find_spec("_mlprobe_plaidml_compat")
        found[key] = rec
    emit({"event": "discover", "python": sys.version.split()[0], "executable": sys.executable,
          "prefix": sys.prefix,
          "implementation": platform.python_implementation(), "platform": sys.platform,
          "machine": platform.machine(), "cpu_count": os.cpu_count(), "frameworks": found,
          "protocol": PROTOCOL})
    return 0


def wanted(dev, requested):
    if not requested:
        return True
    for r in requested:
        r = r.lower()
        if r in (dev["id"].lower(), dev["kind"], dev["id"].split(":")[0].lower(), dev.get("api")):
            return True
        if r == "gpu" and dev["kind"] != "cpu":
            return True
    return False


def mode_run(cfg):
    fw = cfg["framework"]
    inject(cfg, "*", "import")
    t0 = time.time()
    try:
        backend = BACKENDS[fw](cfg)
    except Exception as exc:
        emit({"event": "fatal", "stage": "import", "error": short_error(exc),
              "traceback": traceback.format_exc()[-2000:]})
        return 0
    emit({"event": "hello", "framework": fw, "version": backend.version, "import_s": round(time.time() - t0, 3),
          "python": sys.version.split()[0], "info": _safe(backend.info)})
    inject(cfg, "*", "devices")
    try:
        found, missing = backend.devices()
    except Exception as exc:
        emit({"event": "fatal", "stage": "devices", "error": short_error(exc),
              "traceback": traceback.format_exc()[-2000:]})
        return 0
    requested = cfg.get("devices")
    todo = [d for d in found if wanted(d, requested)]
    if cfg.get("cpu_baseline") and todo and not any(d["kind"] == "cpu" for d in todo):
        todo = [d for d in found if d["kind"] == "cpu"][:1] + todo  # the CPU is the baseline
    emit({"event": "devices", "devices": found, "unavailable": missing, "todo": [d["id"] for d in todo]})
    if cfg.get("enumerate_only"):
        emit({"event": "done"})
        return 0
    if fw == "plaidml":
        todo = todo[:1]  # the runner starts one process per PlaidML device
        if todo:
            backend.open(todo[0]["id"])
    only_speed = cfg.get("speed_only")
    for dev in todo:
        if only_speed:
            emit({"event": "stage", "device": dev["id"], "stage": "speed"})
            try:
                rec = backend.speed(dev, inject(cfg, dev["id"], "speed"))
            except Exception as exc:
                rec = {"error": short_error(exc)}
            emit({"event": "result", "device": dev["id"], "stage": "speed", "data": rec})
            emit({"event": "device_done", "device": dev["id"], "data": {"device": dev["id"], "speed": rec}})
        else:
            run_device(cfg, backend, dev)
    emit({"event": "done"})
    return 0


# ---------------------------------------------------------------- OpenCL loader --------------
# `python payload.py opencl-loader NAME`: open the ICD loader NAME the way a framework that dlopens it
# by name does (PlaidML opens "libOpenCL.so"), in this environment, and say which file the dynamic
# linker gave, whether that file reads OCL_ICD_FILENAMES, and the platforms and devices it lists.
# One name per process: two loaders in one process would share their ICDs.
_CL_NAME, _CL_VENDOR, _CL_VERSION = 0x0902, 0x0903, 0x0901
_CL_DEV_NAME, _CL_DEV_VENDOR, _CL_DEV_TYPE = 0x102B, 0x102C, 0x1000
_CL_TYPES = {1: "DEFAULT", 2: "CPU", 4: "GPU", 8: "ACCELERATOR", 16: "CUSTOM"}


def _loaded_from(ctypes, lib, symbol):
    class DlInfo(ctypes.Structure):
        _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                    ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]
    try:
        dladdr = ctypes.CDLL(None).dladdr
        dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
        info = DlInfo()
        addr = ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value
        if dladdr(addr, ctypes.byref(info)) and info.dli_fname:
            return os.fsdecode(info.dli_fname)
    except Exception:
        pass
    return getattr(lib, "_name", None)


def _cl_string(ctypes, fn, handle, param):
    size = ctypes.c_size_t(0)
    if fn(handle, param, 0, None, ctypes.byref(size)) != 0 or size.value > 65536:
        return None
    buf = ctypes.create_string_buffer(size.value or 1)
    if fn(handle, param, size, buf, None) != 0:
        return None
    return buf.value.decode("utf-8", "replace").strip()


def _icd_files(folder):
    out = []
    try:
        names = sorted(os.listdir(folder))
    except OSError as exc:
        return None, short_error(exc)
    for n in names:
        if not n.endswith(".icd"):
            continue
        path = os.path.join(folder, n)
        try:
            with open(path, "rb") as fh:
                text = fh.read(4096).decode("utf-8", "replace")
            out.append({"file": n, "library": text.strip().splitlines()[0].strip() if text.strip() else ""})
        except (OSError, IndexError) as exc:
            out.append({"file": n, "library": None, "error": short_error(exc)})
    return out, None


def mode_opencl_loader(name):
    import ctypes
    env = {k: os.environ.get(k) for k in ("OCL_ICD_FILENAMES", "OCL_ICD_VENDORS", "LD_LIBRARY_PATH",
                                          "OPENCL_VENDOR_PATH") if os.environ.get(k) is not None}
    vendors = os.environ.get("OCL_ICD_VENDORS") or "/etc/OpenCL/vendors"
    files, ferr = _icd_files(vendors) if os.path.isdir(vendors) else (None, "not a folder")
    rec = {"event": "opencl_loader", "name": name, "env": env, "vendors_dir": vendors, "icd_files": files,
           "vendors_error": ferr, "path": None, "error": None, "reads_ocl_icd_filenames": None,
           "platforms": None}
    try:
        lib = ctypes.CDLL(name)
    except OSError as exc:
        rec["error"] = short_error(exc)
        emit(rec)
        return 0
    path = _loaded_from(ctypes, lib, "clGetPlatformIDs")
    rec["path"] = os.path.realpath(path) if path else None
    try:
        with open(rec["path"], "rb") as fh:
            rec["reads_ocl_icd_filenames"] = b"OCL_ICD_FILENAMES" in fh.read(64 << 20)
    except (OSError, TypeError):
        pass
    emit(dict(rec, event="tick"))
    n = ctypes.c_uint(0)
    rc = lib.clGetPlatformIDs(0, None, ctypes.byref(n))
    plats = []
    if rc == 0 and 0 < n.value <= 64:
        ids = (ctypes.c_void_p * n.value)()
        lib.clGetPlatformIDs(n.value, ids, None)
        pinfo, dinfo = lib.clGetPlatformInfo, lib.clGetDeviceInfo
        pinfo.argtypes = dinfo.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_size_t, ctypes.c_void_p,
                                           ctypes.POINTER(ctypes.c_size_t)]
        lib.clGetDeviceIDs.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint,
                                       ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint)]
        for pid in ids:
            p = {"name": _cl_string(ctypes, pinfo, pid, _CL_NAME), "vendor": _cl_string(ctypes, pinfo, pid, _CL_VENDOR),
                 "version": _cl_string(ctypes, pinfo, pid, _CL_VERSION), "devices": []}
            dn = ctypes.c_uint(0)
            if lib.clGetDeviceIDs(pid, 0xFFFFFFFF, 0, None, ctypes.byref(dn)) == 0 and 0 < dn.value <= 256:
                dids = (ctypes.c_void_p * dn.value)()
                lib.clGetDeviceIDs(pid, 0xFFFFFFFF, dn.value, dids, None)
                for did in dids:
                    t = ctypes.c_uint64(0)
                    dinfo(did, _CL_DEV_TYPE, ctypes.sizeof(t), ctypes.byref(t), None)
                    kinds = [v for k, v in sorted(_CL_TYPES.items()) if t.value & k]
                    p["devices"].append({"name": _cl_string(ctypes, dinfo, did, _CL_DEV_NAME),
                                         "vendor": _cl_string(ctypes, dinfo, did, _CL_DEV_VENDOR),
                                         "type": kinds[0] if kinds else None})
            plats.append(p)
    elif rc != 0:
        rec["platforms_error"] = "clGetPlatformIDs returned %d" % rc
    rec["platforms"] = plats
    emit(rec)
    return 0


def _safe(fn):
    try:
        return fn()
    except Exception as exc:
        return {"error": short_error(exc)}


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        sys.path.pop(0)  # don't let files beside the payload shadow the target's modules
    open_channel()
    mode = argv[1] if len(argv) > 1 else "discover"
    if mode == "discover":
        return mode_discover()
    if mode == "opencl-loader":
        return mode_opencl_loader(argv[2] if len(argv) > 2 else "libOpenCL.so")
    cfg = dict(DEFAULTS)
    cfg.update(json.loads(argv[2]) if len(argv) > 2 else {})
    if cfg.get("quick"):
        cfg.update({"speed_repeats": 3, "speed_budget_s": 3.0, "speed_repeat_s": 0.25,
                    "learn_max_s": min(cfg["learn_max_s"], 15.0)})
    try:
        return mode_run(cfg)
    except Exception as exc:
        emit({"event": "fatal", "stage": "run", "error": short_error(exc),
              "traceback": traceback.format_exc()[-2000:]})
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
