# mypy: ignore-errors
# The verify payload's harness: the protocol (events on the original stdout), the settings and
# tolerances (DEFAULTS: the one source; the runner imports them and sends them in every config), the
# seeded data sets, the statistics, fault injection for the tests, and the stages every backend runs
# (run_device, learn_loop, timed_training). Standard library only; Python 3.7 compatible (see
# __main__.py). The host (mlprobe/verify/runner.py) imports this file too, for DEFAULTS and `wanted`.
#
# Protocol: one JSON object per line on the ORIGINAL stdout, each prefixed with MARK. open_channel()
# moves fd 1 onto stderr first, so whatever a framework prints (native code included) cannot corrupt
# the protocol. Events: hello, devices, stage (start), tick (progress inside a stage; also what keeps
# the runner's stall timer from calling a slow device hung), timing (gated runs), result (stage
# finished), device_done, done, fatal. The runner turns them into verdicts; the payload only measures.
import json
import math
import os
import random
import sys
import time
import traceback

MARK = "@@mlprobe-verify@@ "
PROTOCOL = 1

# Stated tolerances and targets: the one source. The runner states them in every result and sends
# them, with its overrides, in the config (settings() fills in what a config leaves out).
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
    # aim for at least this long per timed repeat (K steps, then sync): long enough that the
    # synchronisation at its end is a few per mille of it on a GPU, and that a CPU step is whole
    "speed_repeat_s": 0.25,
    "speed_budget_s": 6.0,  # timed part of the speed test, per device (warm-up excluded)
    # Repeats stop early once the median is stable: after at least this many, when one more repeat
    # moved the median by no more than speed_stable_rtol of it.
    "speed_stable_after": 4,
    "speed_stable_rtol": 0.02,
    "warmup_cpu": 2,
    "warmup_accel": 5,
    "quick": False,
}
# What --quick changes (after the overrides: a quick run stays quick).
QUICK = {"speed_repeats": 3, "speed_budget_s": 3.0, "speed_repeat_s": 0.15}
QUICK_LEARN_MAX_S = 15.0


def settings(given):
    """DEFAULTS, then the config's values, then the quick limits when it asks for a quick run. The
    same function in the runner and in the child, so a config it made reads the same there."""
    cfg = dict(DEFAULTS)
    cfg.update(given or {})
    if cfg.get("quick"):
        cfg.update(QUICK)
        cfg["learn_max_s"] = min(cfg["learn_max_s"], QUICK_LEARN_MAX_S)
    return cfg

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
        from importlib import metadata  # Python 3.8+  # novm: 3.7 scans dist-info below
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


_DATA = {}


def _once(fn):
    """The data sets are pure functions of their arguments: made once per process, shared by every
    device (a list is handed out as a copy, so no caller can change another's data)."""
    def wrapper(*args):
        key = (fn.__name__,) + args
        if key not in _DATA:
            _DATA[key] = fn(*args)
        xs, ys = _DATA[key]
        return list(xs), list(ys)
    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


@_once
def correctness_batch(seed, n):
    """n images 28x28 (row-major, one channel) in [0, 1) and labels, from a seeded stdlib RNG."""
    rng = random.Random(seed)
    xs = [rng.random() for _ in range(n * 28 * 28)]
    ys = [rng.randrange(10) for _ in range(n)]
    return xs, ys


LEARN_SIZE = 16


@_once
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


def spread(samples):
    """What varies between the repeats: the range of the samples (fastest less slowest) over their
    median (0.01 = 1 %). Not a robust statistic on purpose: one repeat slowed by another process
    is exactly what a reader of "spread" needs to see."""
    mid = median(samples)
    if not mid or not samples:
        return None
    return round((max(samples) - min(samples)) / mid, 4)


def median_stable(cfg, samples):
    """One more repeat moved the median by no more than speed_stable_rtol (after enough repeats),
    and the repeats themselves agree within twice that: a median that holds still while the repeats
    jump about (a busy machine) is not called stable."""
    if len(samples) < max(2, cfg["speed_stable_after"]):
        return False
    now, before = median(samples), median(samples[:-1])
    if not now or abs(now - before) > cfg["speed_stable_rtol"] * now:
        return False
    s = spread(samples)
    return s is not None and s <= 2 * cfg["speed_stable_rtol"]


def cpu_times():
    """(busy, steal, this process's own CPU) seconds so far, all CPUs together, from /proc/stat and
    os.times(); None where /proc/stat is not there (macOS, Windows)."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = fh.readline().split()
        hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    except (OSError, ValueError):
        return None
    if not fields or fields[0] != "cpu":
        return None
    v = [int(x) for x in fields[1:]]
    # user nice system idle iowait irq softirq steal (guest is counted in user already)
    busy = sum(v[i] for i in (0, 1, 2, 5, 6) if i < len(v))
    steal = v[7] if len(v) > 7 else 0
    own = os.times()
    return busy / hz, steal / hz, own.user + own.system


def usable_cpus():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def machine_load(before, after, wall_s, cpus=None, load_1m=None):
    """How busy the machine was while the repeats were timed, and whether that is too busy for the
    figure to be repeatable: the load average above the CPUs this process may use, time stolen by
    the hypervisor, or other processes using a quarter of the CPUs or more."""
    cpus = cpus or usable_cpus()
    if load_1m is None:
        try:
            load_1m = os.getloadavg()[0]
        except (AttributeError, OSError):
            load_1m = None
    out = {"cpus": cpus, "load_1m": round(load_1m, 2) if load_1m is not None else None,
           "steal": None, "others": None, "busy": False, "why": None}
    if before is not None and after is not None and wall_s > 0:
        capacity = wall_s * cpus
        out["steal"] = round(max(0.0, after[1] - before[1]) / capacity, 3)
        others = (after[0] - before[0]) - (after[2] - before[2])
        out["others"] = round(min(1.0, max(0.0, others / capacity)), 3)
    why = []
    if out["load_1m"] is not None and out["load_1m"] > cpus:
        why.append("load average %.1f on %d CPU%s" % (out["load_1m"], cpus, "" if cpus == 1 else "s"))
    if out["steal"] is not None and out["steal"] >= 0.05:
        why.append("%.0f %% of the CPU time stolen by the hypervisor" % (100 * out["steal"]))
    if out["others"] is not None and out["others"] >= 0.25:
        why.append("other processes used %.0f %% of the CPUs" % (100 * out["others"]))
    if why:
        out["busy"], out["why"] = True, "; ".join(why)
    return out


def speed_record(cfg, samples, k, warmup, final_loss, nan, stopped=None, load=None):
    ips = median(samples)
    return {
        "machine_load": load,
        "images_per_s": ips,
        "seconds_per_epoch": (60000.0 / ips) if ips else None,
        "batch": cfg["speed_batch"],
        "warmup_steps": warmup,
        "steps_per_repeat": k,
        "repeats": len(samples),
        "spread": spread(samples),
        "stopped": stopped,
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


def timing_gate(cfg, on):
    """Timed loops run alone: with cfg["gated"], the runner (verify/overlap.py) starts several
    framework processes at once, and each asks before its timed loops ("timing" on) and waits for
    the runner's "go" line on stdin, given once every other process is waiting too; "timing" off
    lets the others go on."""
    if not cfg.get("gated"):
        return
    emit({"event": "timing", "on": bool(on)})
    if on:
        try:
            sys.stdin.readline()  # "go" (an end of file: the runner is gone, nothing to wait for)
        except Exception:
            pass


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
        untimed += warm - 1
    timing_gate(cfg, True)
    try:
        if step_s < 1.0 or cfg.get("gated"):
            # The step time that sizes the repeats: measured alone (the warm-up may have shared the
            # machine, and a gated child may have been paused in it while another one timed: a fast
            # step that looked slow), and the least of it and the warm-up's, so that one step slowed
            # by something else does not size the repeats as single steps.
            t0 = time.perf_counter()
            v = step()
            sync(v)
            alone = time.perf_counter() - t0
            untimed += 1
            if step_s >= 1.0 and alone < 1.0:  # only looked slow: warm up as a fast device does
                for _ in range(warm - 1):
                    v = step()
                sync(v)
                untimed += warm - 1
            step_s = min(step_s, alone)
        k, repeats = speed_plan(cfg, step_s, accel)
        samples = []
        b = cfg["speed_batch"]
        stopped = "repeats"
        times0, wall0 = cpu_times(), time.perf_counter()
        for _ in range(repeats):
            # next_s: how long until the next line, so the runner does not take a slow device for a hung one
            emit({"event": "tick", "stage": "speed", "repeat": len(samples), "of": repeats,
                  "next_s": round(k * step_s, 3)})
            t0 = time.perf_counter()
            for _ in range(k):
                v = step()
            sync(v)
            samples.append(k * b / (time.perf_counter() - t0))
            if len(samples) < repeats and median_stable(cfg, samples):
                stopped = "stable"
                break
        if stopped == "repeats" and repeats < cfg["speed_repeats"]:
            stopped = "budget"
        load = machine_load(times0, cpu_times(), time.perf_counter() - wall0)
    finally:
        timing_gate(cfg, False)
    emit({"event": "tick", "stage": "speed", "repeat": len(samples), "of": repeats})
    final = float("nan") if nan else to_float(v)
    return speed_record(cfg, samples, k, untimed, final, nan, stopped, load)


def find_spec(name):
    try:
        import importlib.util
        return importlib.util.find_spec(name) is not None
    except Exception:
        return False


# ------------------------------------------------------------------ shared by the backends

def safe(fn):
    try:
        return fn()
    except Exception as exc:
        return {"error": short_error(exc)}


def wanted(dev, requested):
    """Does a device match one of the requests (its id, kind, id prefix, api, or 'gpu' for any
    non-CPU device)? No requests: every device. The host's device check reads requests this way too."""
    if not requested:
        return True
    for r in requested:
        r = r.lower()
        if r in (dev["id"].lower(), dev["kind"], dev["id"].split(":")[0].lower(), dev.get("api")):
            return True
        if r == "gpu" and dev["kind"] != "cpu":
            return True
    return False


# The Keras-MNIST CNN's raw parameters (kernels HWIO, biases, dense (in, out)), for the backends
# that build it from arrays (TensorFlow, JAX).
CNN_SHAPES = [(3, 3, 1, 32), (32,), (3, 3, 32, 64), (64,), (9216, 128), (128,), (128, 10), (10,)]
LEARN_SHAPES = [(3, 3, 1, 8), (8,), (8 * 7 * 7, 10), (10,)]


def init_params(np, seed, dtype, shapes):
    """Glorot-uniform kernels and zero biases from numpy's seeded RNG (numpy handed in by the backend)."""
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
