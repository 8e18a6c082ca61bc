"""How many GPUs a recommended recipe's framework will use, and how: PyTorch sees cuda:0…cuda:N-1
(one process per GPU with DDP, `torchrun --nproc_per_node=N`), JAX's `jax.devices()` lists N, and
TensorFlow's `MirroredStrategy` replicates over /GPU:0…/GPU:N-1. A `CUDA_VISIBLE_DEVICES` (ROCm:
`ROCR_VISIBLE_DEVICES`, then `HIP_VISIBLE_DEVICES` or `CUDA_VISIBLE_DEVICES`) that hides some GPUs is
read the way the runtime reads it: indices or UUIDs, separated by commas; an empty value or `-1`
hides every GPU; the first entry that is invalid, out of range or repeated ends the list, and the
entries after it are ignored.

Pure: the environment comes in as a mapping (the bundle's host.json `env` on replay, the live
environment for this machine), never from os.environ here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Mapping, Optional, Sequence, Tuple

from ..model.facts import Facts, GpuFacts
from ..model.plan import GpuUse, Plan

# The variables that decide which GPUs a framework sees (host.py captures these into host.json).
VARIABLES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
_VENDOR = {"cuda": "nvidia", "rocm": "amd"}
_UUID = re.compile(r"(GPU|MIG)-[0-9a-fA-F-]+$")


@dataclass(frozen=True)
class Visibility:
    """Which of the machine's GPUs (positions in the scan's list of that vendor) a process sees."""

    visible: Tuple[int, ...]
    variable: Optional[str] = None  # the variable that decided, when one did
    value: Optional[str] = None
    notes: Tuple[str, ...] = ()


def parse_visible(value: Optional[str], count: int, uuids: Sequence[Optional[str]] = (),
                  variable: str = "CUDA_VISIBLE_DEVICES") -> Visibility:
    """Which of `count` GPUs stay visible under `variable`=`value` (None: the variable is unset).
    `uuids` are the GPUs' UUIDs in the same order, for entries given as GPU-… (a unique prefix is
    enough, as CUDA accepts)."""
    if value is None:
        return Visibility(tuple(range(count)))
    notes: List[str] = []
    entries = [e.strip() for e in value.split(",")]
    if value.strip() == "":
        return Visibility((), variable, value, (f"{variable} is set but empty: every GPU is hidden",))
    visible: List[int] = []
    for pos, entry in enumerate(entries):
        index: Optional[int] = None
        why = ""
        if re.fullmatch(r"\d+", entry):
            index = int(entry)
            if index >= count:
                why = f"there is no GPU {index} (the machine has {count})"
                index = None
        elif _UUID.match(entry) and entry.upper().startswith("GPU-"):
            matches = [i for i, u in enumerate(uuids) if u and u.lower().startswith(entry.lower())]
            if len(matches) == 1:
                index = matches[0]
            else:
                why = "no GPU has that UUID" if not matches else "that UUID prefix names several GPUs"
        elif entry.upper().startswith("MIG-"):
            why = "a MIG instance, not a whole GPU (the process sees that one slice)"
        else:
            why = "not a GPU index or UUID" if entry != "-1" else "-1 hides every GPU from there on"
        if index is not None and index in visible:
            why, index = f"GPU {index} is listed twice", None
        if index is None:
            rest = entries[pos + 1:]
            notes.append(f"{variable}={value!r}: entry {entry!r} ends the list ({why})"
                         + (f"; {', '.join(repr(r) for r in rest)} after it {'is' if len(rest) == 1 else 'are'} "
                            "ignored" if rest else ""))
            break
        visible.append(index)
    hidden = count - len(visible)
    if hidden > 0:
        notes.append(f"{variable}={value!r} hides {hidden} of the {count} GPUs")
    return Visibility(tuple(visible), variable, value, tuple(notes))


def visibility(backend: str, gpus: Sequence[GpuFacts], env: Mapping[str, Optional[str]]) -> Visibility:
    count = len(gpus)
    uuids = [g.uuid for g in gpus]
    if backend == "rocm":
        vis = Visibility(tuple(range(count)))
        notes: List[str] = []
        variable, value = None, None
        # ROCR_VISIBLE_DEVICES filters at the runtime; HIP_VISIBLE_DEVICES (or CUDA_VISIBLE_DEVICES,
        # which HIP honours too) then picks among what is left.
        for name in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES" if env.get("HIP_VISIBLE_DEVICES") is not None
                     else "CUDA_VISIBLE_DEVICES"):
            if env.get(name) is None:
                continue
            step = parse_visible(env.get(name), len(vis.visible), [uuids[i] for i in vis.visible], name)
            vis = Visibility(tuple(vis.visible[i] for i in step.visible))
            notes.extend(step.notes)
            variable, value = name, env.get(name)
        return Visibility(vis.visible, variable, value, tuple(notes))
    return parse_visible(env.get("CUDA_VISIBLE_DEVICES"), count, uuids)


def _devices(framework: str, n: int) -> Tuple[str, ...]:
    if framework == "tensorflow" or framework == "keras":
        return tuple(f"/GPU:{i}" for i in range(n))
    if framework == "jax":
        return tuple(f"cuda:{i}" for i in range(n))
    return tuple(f"cuda:{i}" for i in range(n))  # torch names ROCm GPUs cuda:N too


def _how(framework: str, n: int, total: int) -> str:
    if n == 0:
        return (f"no GPU is visible, so {framework} will run on the CPU" if total else
                f"no GPU for {framework} was found")
    if framework == "torch":
        if n == 1:
            return "torch uses cuda:0"
        return (f"torch sees cuda:0…cuda:{n - 1}; one process per GPU with DistributedDataParallel: "
                f"`torchrun --nproc_per_node={n} train.py`")
    if framework in ("tensorflow", "keras"):
        if n == 1:
            return "TensorFlow places work on /GPU:0"
        return (f"TensorFlow sees /GPU:0…/GPU:{n - 1}; `tf.distribute.MirroredStrategy()` replicates the "
                f"model on all {n}")
    if framework == "jax":
        return f"`jax.devices()` lists {n} GPU(s)" + ("; shard or `jax.pmap` over them" if n > 1 else "")
    return f"{n} GPU(s) visible"


def gpu_use(plan: Plan, facts: Facts, env: Mapping[str, Optional[str]]) -> List[GpuUse]:
    """For each framework's top recipe on a CUDA or ROCm backend: how many GPUs it will use, and how."""
    out: List[GpuUse] = []
    by_id = {r.recipe: r for r in plan.recommended}
    for framework, recipe_id in plan.top.items():
        r = by_id.get(recipe_id) if recipe_id else None
        if not r:
            continue
        backend = r.backend or ""
        vendor = _VENDOR.get(backend)
        if vendor is None:
            continue
        gpus = [g for g in facts.gpus if g.vendor == vendor]
        # The recipe's own variables (ROCR_VISIBLE_DEVICES on an iGPU + dGPU machine) go into the
        # environment it installs, so they decide which GPUs it will use.
        vis = visibility(backend, gpus, {**dict(env), **r.env})
        notes = list(vis.notes)
        if vendor == "nvidia":
            names = {g.name for g in gpus if g.name}
            if len(vis.visible) > 1 and len(names) > 1 and env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
                notes.append("the GPUs differ and CUDA numbers them fastest first: set CUDA_DEVICE_ORDER=PCI_BUS_ID "
                             "so that cuda:N (and the indices in CUDA_VISIBLE_DEVICES) match nvidia-smi's GPU N")
            mig = [i for i, g in enumerate(gpus) if (g.mig_mode or "").lower() == "enabled"]
            if mig:
                notes.append("MIG is on for GPU " + ", ".join(str(i) for i in mig)
                             + ": CUDA shows its MIG instances instead, and one process uses one instance")
                slices = [(i, m) for i in mig for m in gpus[i].mig]
                if slices:
                    # each MIG device is the device a job gets; its MIG- UUID picks it
                    listed = "; ".join(f"GPU {i} MIG {m.profile} device {m.index}" + (f" = {m.uuid}" if m.uuid else "")
                                       for i, m in slices[:8]) + ("; ..." if len(slices) > 8 else "")
                    first = next((m.uuid for _, m in slices if m.uuid), None)
                    notes.append(f"{len(slices)} MIG device(s): {listed}"
                                 + (f"; give a job one with CUDA_VISIBLE_DEVICES={first}" if first else ""))
        n = len(vis.visible)
        out.append(GpuUse(
            recipe=str(recipe_id), framework=str(framework), backend=backend, gpus=len(gpus),
            visible=vis.visible, devices=_devices(str(framework), n), how=_how(str(framework), n, len(gpus)),
            variable=vis.variable, value=vis.value, notes=tuple(notes),
        ))
    return out


__all__ = ["GpuUse", "VARIABLES", "Visibility", "gpu_use", "parse_visible", "visibility"]
