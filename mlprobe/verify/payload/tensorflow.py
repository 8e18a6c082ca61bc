# mypy: ignore-errors
# The verify payload's tensorflow backend. TensorFlow 2 in eager mode with raw ops (no Keras): the CPU and
# whatever GPU or pluggable device it lists (CUDA, ROCm, Metal, DirectML). Loaded by __main__.py only when a
# config names it; the framework is imported only in Backend(cfg). Python 3.7 compatible, standard library +
# the framework (see __main__.py).
import os
import sys

from ._harness import (CNN_SHAPES, LEARN_SHAPES, LEARN_SIZE, compare_grads, correctness_batch,
    correctness_record, dist_version, find_spec, init_params, learn_loop, learning_data, peak_rss_bytes,
    short_error, timed_training)


# What discover checks: the modules that must import, the distributions that give the version.
MODULES = ("tensorflow",)
DISTS = ("tensorflow", "tensorflow-cpu", "tensorflow-macos", "tensorflow-intel", "tensorflow-gpu",
         "tensorflow-rocm")


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
        metal = find_spec("tensorflow_metal") or dist_version("tensorflow-metal") is not None
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
        w32 = init_params(np, cfg["seed"], np.float32, CNN_SHAPES)
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
        w = init_params(np, cfg["seed"] + 1, np.float32, LEARN_SHAPES)
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
        w = init_params(np, cfg["seed"] + 4, np.float32, CNN_SHAPES)
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


Backend = TFBackend
