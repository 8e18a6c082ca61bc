# mypy: ignore-errors
# The verify payload's plaidml backend. PlaidML 0.7 with Keras 2.2.4: one PlaidML device per process; the
# numpy float64 reference checks its gradients. Loaded by __main__.py only when a config names it; the
# framework is imported only in Backend(cfg). Python 3.7 compatible, standard library + the framework (see
# __main__.py).
import os

from ._harness import (LEARN_SIZE, compare_grads, correctness_batch, correctness_record, dist_version, find_spec,
    learn_loop, learning_data, timed_training)
from ._numpy_ref import np_cnn_loss_grads


# What discover checks: the modules that must import, the distributions that give the version.
MODULES = ("plaidml", "keras")
DISTS = ("plaidml-keras",)


def discover_extra(ok):
    """PlaidML's own version, Keras's, and whether mlprobe's compatibility shim is importable."""
    return {"plaidml_version": dist_version("plaidml") if ok else None,
            "keras_version": dist_version("keras", "Keras") if ok else None,
            "shim": find_spec("_mlprobe_plaidml_compat")}


class PlaidMLBackend(object):
    """One PlaidML device per process: PlaidML opens the device named by PLAIDML_DEVICE_IDS once."""
    name = "plaidml"
    one_device_per_process = True  # the runner starts one process per PlaidML device

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


Backend = PlaidMLBackend
