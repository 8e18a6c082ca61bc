"""The verify result as typed, frozen contracts: what `run_verify` returns and `mlprobe verify --json`
prints (and a report embeds under `verify`). JSON in and out through model/contract.py; the stage
records a payload writes (correctness, learning, speed, proof, failure) stay JSON objects, described
in verify/payload/_harness.py. verify/schema.py is the published schema (with the verdict and framework
enums); a test checks it against these types field by field."""

from __future__ import annotations

from dataclasses import field
from typing import Any, Dict, Mapping, Optional, Tuple

from .contract import contract, from_json, OPTIONAL_KEY, to_json
from .contract import Record as Contract

Record = Optional[Mapping[str, Any]]


@contract
class DeviceResult(Contract):
    """One framework on one device: the verdict, why, and the stage records behind it."""

    framework: str
    framework_version: Optional[str]
    python: str
    device: str
    kind: Optional[str]
    name: Optional[str]
    verdict: Optional[str]
    reason: Optional[str]
    correctness: Record
    learning: Record
    speed: Record
    proof: Record
    speedup_vs_framework_cpu: Optional[float]
    speedup_vs_best_cpu: Optional[float]
    failure: Record
    api: Optional[str] = None
    # what the device listing said, where it says it
    compute_capability: Optional[str] = field(default=None, metadata=OPTIONAL_KEY)
    gfx_target: Optional[str] = field(default=None, metadata=OPTIONAL_KEY)
    total_memory_bytes: Optional[int] = field(default=None, metadata=OPTIONAL_KEY)
    experimental: Optional[bool] = field(default=None, metadata=OPTIONAL_KEY)
    cpu_note: Optional[str] = field(default=None, metadata=OPTIONAL_KEY)
    # NOT_SEEN: what asked for the device, what the framework does list, and why it likely does not
    requested_by: Optional[str] = field(default=None, metadata=OPTIONAL_KEY)
    listed_devices: Optional[Tuple[str, ...]] = field(default=None, metadata=OPTIONAL_KEY)
    likely_cause: Optional[str] = field(default=None, metadata=OPTIONAL_KEY)
    diagnosis: Record = field(default=None, metadata=OPTIONAL_KEY)
    # what varies between the timed repeats behind speed.images_per_s ((fastest - slowest) / median:
    # 0.01 = 1 %; results of older versions: median absolute deviation / median), where measured
    speed_spread: Optional[float] = field(default=None, metadata=OPTIONAL_KEY)


@contract
class VerifyPython(Contract):
    """The interpreter verify ran (`--python`, or the one running mlprobe)."""

    executable: str
    version: Optional[str] = None
    prefix: Optional[str] = None
    platform: Optional[str] = None
    machine: Optional[str] = None
    cpu_count: Optional[int] = None


@contract
class VerifyRequest(Contract):
    """What verify was asked for: framework, device, quick mode and the extra environment."""

    framework: str
    device: Optional[str]
    quick: bool
    env: Optional[Mapping[str, str]] = None


@contract
class FrameworkRun(Contract):
    """One framework verify looked at: verified, unavailable (and why) or not installed."""

    name: str
    status: str
    version: Optional[str] = None
    import_s: Optional[float] = field(default=None, metadata=OPTIONAL_KEY)
    info: Record = field(default=None, metadata=OPTIONAL_KEY)
    unavailable_devices: Optional[Tuple[Mapping[str, Any], ...]] = field(default=None, metadata=OPTIONAL_KEY)
    notes: Optional[Tuple[str, ...]] = field(default=None, metadata=OPTIONAL_KEY)
    shim_installed: Optional[bool] = field(default=None, metadata=OPTIONAL_KEY)
    reason: Optional[str] = field(default=None, metadata=OPTIONAL_KEY)
    stderr_tail: Optional[str] = field(default=None, metadata=OPTIONAL_KEY)


@contract
class CpuFigure(Contract):
    """A CPU speed: the framework's own CPU run, or a peer (another framework or interpreter)."""

    framework: str
    version: Optional[str]
    python: str
    images_per_s: float
    seconds_per_epoch: Optional[float] = field(default=None, metadata=OPTIONAL_KEY)
    device: Optional[str] = field(default=None, metadata=OPTIONAL_KEY)
    speed: Record = field(default=None, metadata=OPTIONAL_KEY)
    spread: Optional[float] = field(default=None, metadata=OPTIONAL_KEY)  # as DeviceResult.speed_spread


@contract
class SlowGpu(Contract):
    """A GPU slower than the median of its peers of the same model by more than the limit."""

    framework: str
    device: str
    name: Optional[str]
    images_per_s: float
    peer_median: float
    peers: Tuple[str, ...]
    slower_by: float
    message: str


@contract
class VerifyResult(Contract):
    """mlprobe verify: a result per framework and device, the CPU figures they are measured against,
    the tolerances used, a summary in words and the exit status it implies."""

    schema: str
    mlprobe_version: str
    started: str
    python: VerifyPython
    request: VerifyRequest
    frameworks: Tuple[FrameworkRun, ...]
    results: Tuple[DeviceResult, ...]
    cpu_peers: Tuple[CpuFigure, ...]
    best_cpu: Optional[CpuFigure]
    tolerances: Mapping[str, Any]
    summary: Tuple[str, ...]
    exit_code: int
    wall_s: float
    overrides: Optional[Mapping[str, Any]] = None
    slow_gpus: Optional[Tuple[SlowGpu, ...]] = field(default=None, metadata=OPTIONAL_KEY)

    def to_json(self) -> Dict[str, Any]:
        doc: Dict[str, Any] = to_json(self)
        return doc

    @classmethod
    def from_json(cls, doc: Any) -> "VerifyResult":
        """A verify result; a field of the wrong shape is a ContractError naming it."""
        return from_json(cls, doc)


__all__ = ["CpuFigure", "DeviceResult", "FrameworkRun", "SlowGpu", "VerifyPython", "VerifyRequest",
           "VerifyResult"]
