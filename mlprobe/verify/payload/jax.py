# mypy: ignore-errors
# The verify payload's jax backend. JAX: its CPU device (the float64 reference too) and the accelerators its
# plugins give. Loaded by __main__.py only when a config names it; the framework is imported only in
# Backend(cfg). Python 3.7 compatible, standard library + the framework (see __main__.py).
import os

from ._harness import (CNN_SHAPES, LEARN_SHAPES, LEARN_SIZE, compare_grads, correctness_batch,
    correctness_record, dist_version, init_params, learn_loop, learning_data, peak_rss_bytes, short_error,
    timed_training)


# What discover checks: the modules that must import, the distributions that give the version.
MODULES = ("jax", "jaxlib")
DISTS = ("jax",)


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
        if cfg.get("cpu_only"):
            # this child times the CPU alone (a CPU peer, or the CPU half of a split run): no GPU backend,
            # which would reserve most of the GPU's memory as it starts
            for option in ("jax_platforms", "jax_platform_name"):  # the second: jax before 0.3.x
                try:
                    jax.config.update(option, "cpu")
                    break
                except Exception:
                    continue
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
        if self.cfg.get("cpu_only"):
            return found, missing  # the accelerators are another child's to list
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
        w32 = init_params(np, cfg["seed"], np.float32, CNN_SHAPES)
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
        w = init_params(np, cfg["seed"] + 1, np.float32, LEARN_SHAPES)
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
        w = init_params(np, cfg["seed"] + 4, np.float32, CNN_SHAPES)
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


Backend = JaxBackend
