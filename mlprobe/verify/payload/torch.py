# mypy: ignore-errors
# The verify payload's torch backend. PyTorch: the CPU, CUDA and ROCm (torch.cuda), Apple's MPS, Intel's XPU
# and DirectML (torch-directml) devices. Loaded by __main__.py only when a config names it; the framework is
# imported only in Backend(cfg). Python 3.7 compatible, standard library + the framework (see __main__.py).
import sys

from ._harness import (LEARN_SIZE, compare_grads, correctness_batch, correctness_record, find_spec,
    learn_loop, learning_data, peak_rss_bytes, short_error, timed_training)


# What discover checks: the modules that must import, the distributions that give the version.
MODULES = ("torch",)
DISTS = ("torch",)


class _Optimizer(object):
    """Adam and Adadelta as torch.optim computes them (the same update, in the same tensor ops: one
    call per op over all tensors (torch._foreach_*) where torch.optim would use it, per tensor
    elsewhere), written here because torch.optim's first step imports torch._dynamo: 1.5-5 s of
    import, several times the stage it is part of, which nobody's training loop pays twice."""

    def __init__(self, torch, params, kind, **hyper):
        self.t = torch
        self.params = [p for p in params if p.requires_grad]
        self.kind = kind
        self.hyper = hyper
        self.steps = 0
        self.state = [[torch.zeros_like(p) for p in self.params] for _ in range(2)]
        where = self.params[0].device.type if self.params else "cpu"
        self.foreach = (hasattr(torch, "_foreach_lerp_") and hasattr(torch, "_foreach_addcdiv_")
                        and where in _foreach_devices(torch))

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    def step(self):
        t = self.t
        with t.no_grad():
            ps = [p for p in self.params if p.grad is not None]
            if len(ps) != len(self.params):
                raise RuntimeError("a parameter has no gradient")
            gs = [p.grad for p in ps]
            self.steps += 1
            if self.kind == "adam":
                self._adam(ps, gs, *self.state)
            else:
                self._adadelta(ps, gs, *self.state)

    def _adam(self, ps, gs, avg, avg_sq):
        t, h, n = self.t, self.hyper, self.steps
        b1, b2 = h["betas"]
        step_size = h["lr"] / (1 - b1 ** n)
        bc2_sqrt = (1 - b2 ** n) ** 0.5
        if self.foreach:
            t._foreach_lerp_(avg, gs, 1 - b1)
            t._foreach_mul_(avg_sq, b2)
            t._foreach_addcmul_(avg_sq, gs, gs, value=1 - b2)
            denom = t._foreach_sqrt(avg_sq)
            t._foreach_div_(denom, bc2_sqrt)
            t._foreach_add_(denom, h["eps"])
            t._foreach_addcdiv_(ps, avg, denom, value=-step_size)
            return
        for p, g, m, v in zip(ps, gs, avg, avg_sq):
            m.lerp_(g, 1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            denom = (v.sqrt() / bc2_sqrt).add_(h["eps"])
            p.addcdiv_(m, denom, value=-step_size)

    def _adadelta(self, ps, gs, square_avg, acc_delta):
        t, h = self.t, self.hyper
        rho, eps, lr = h["rho"], h["eps"], h["lr"]
        if self.foreach:
            t._foreach_mul_(square_avg, rho)
            t._foreach_addcmul_(square_avg, gs, gs, value=1 - rho)
            std = t._foreach_add(square_avg, eps)
            t._foreach_sqrt_(std)
            deltas = t._foreach_add(acc_delta, eps)
            t._foreach_sqrt_(deltas)
            t._foreach_div_(deltas, std)
            t._foreach_mul_(deltas, gs)
            t._foreach_mul_(acc_delta, rho)
            t._foreach_addcmul_(acc_delta, deltas, deltas, value=1 - rho)
            t._foreach_add_(ps, deltas, alpha=-lr)
            return
        for p, g, sq, acc in zip(ps, gs, square_avg, acc_delta):
            sq.mul_(rho).addcmul_(g, g, value=1 - rho)
            std = sq.add(eps).sqrt_()
            delta = acc.add(eps).sqrt_().div_(std).mul_(g)
            acc.mul_(rho).addcmul_(delta, delta, value=1 - rho)
            p.add_(delta, alpha=-lr)


def _foreach_devices(torch):
    """The device types torch.optim gives its one-call-for-all-tensors kernels by default."""
    out = ["cuda", "xpu", "mtia"]
    try:
        out.append(torch._C._get_privateuse1_backend_name())
    except Exception:
        pass
    return out


def adam(torch, params, lr):
    return _Optimizer(torch, params, "adam", lr=lr, betas=(0.9, 0.999), eps=1e-8)


def adadelta(torch, params, lr, rho, eps):
    return _Optimizer(torch, params, "adadelta", lr=lr, rho=rho, eps=eps)


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
        if self.cfg.get("cpu_only"):
            # this child times the CPU alone (a CPU peer, or the CPU half of a split run): the
            # accelerators are another child's to list, and starting CUDA here would cost its time
            return found, missing
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
        if find_spec("torch_npu"):
            # Huawei Ascend: torch-npu adds torch.npu (it registers itself from 2.5.1; importing it
            # first is what Ascend recommends, and what older releases need)
            try:
                import torch_npu  # noqa: F401
                npu = getattr(t, "npu", None)
                for i in range(npu.device_count() if npu is not None and npu.is_available() else 0):
                    found.append({"id": "npu:%d" % i, "kind": "npu", "name": npu.get_device_name(i), "api": "cann"})
                if npu is not None and not npu.is_available():
                    missing.append({"id": "npu", "kind": "npu",
                                    "reason": "torch-npu is installed but torch.npu.is_available() is False: no "
                                              "usable NPU, driver or CANN environment (set_env.sh)"})
            except Exception as exc:
                missing.append({"id": "npu", "kind": "npu", "reason": "torch_npu failed: " + short_error(exc)})
        if find_spec("torch_directml"):
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
        elif kind == "npu":
            t.npu.synchronize(self._dev(dev))
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
        opt = adam(t, model.parameters(), lr=0.01)
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
        opt = adadelta(t, model.parameters(), lr=1.0, rho=0.95, eps=1e-7)
        x = t.rand(b, 1, 28, 28).to(d)
        y = t.randint(0, 10, (b,)).to(d)
        if dev["kind"] in ("cuda", "rocm"):
            t.cuda.reset_peak_memory_stats(d)
        elif dev["kind"] == "xpu" and hasattr(t.xpu, "reset_peak_memory_stats"):
            t.xpu.reset_peak_memory_stats(d)
        elif dev["kind"] == "npu":
            t.npu.reset_peak_memory_stats(d)

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
        elif kind == "npu":
            out["max_memory_allocated_bytes"] = int(t.npu.max_memory_allocated(d))
            out["memory_source"] = "torch.npu.max_memory_allocated"
        elif kind == "directml":
            out["memory_source"] = None
            out["note"] = "torch-directml reports no device memory counter"
        else:
            out["peak_rss_bytes"] = peak_rss_bytes()
            out["memory_source"] = "process peak RSS (host memory)"
        self._last = (None, None)
        return out


Backend = TorchBackend
