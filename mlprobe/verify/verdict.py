"""Verdicts from measurements: pure functions, no I/O.

The speed verdicts compare with the best CPU figure measured in the same run (any framework on this
CPU, named), not only with the same framework's CPU path: the question is "faster than the best I can
do on this CPU?". Both ratios are in the result.

ACCELERATED      an accelerator that is correct, learns, and trains >= 1.5x the best CPU figure
MARGINAL         correct and learns, but between 1.0x and 1.5x the best CPU figure: not worth a special setup
SLOWER_THAN_CPU  correct and learns, and slower than the best CPU figure (even when it beats its own
                 framework's CPU path): use the CPU
CPU              the device is a CPU (a framework's CPU, or a "device" such as PlaidML's llvm_cpu.0)
WRONG_RESULTS    wrong loss or gradients, NaN, or it does not learn
UNAVAILABLE      the device could not run the test (absent, crashed, hung, raised); the reason says which
NOT_SEEN         a device that was asked for (--device, the recipe's device, PLAIDML_DEVICE_IDS, a
                 *_VISIBLE_DEVICES list) is not among those the framework lists: never a silent substitute
NO_BASELINE      it works, but no CPU figure was measured to compare it with
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Tuple, Union

from ..model.jsontypes import JsonObject, JsonValue

ACCELERATED_AT = 1.5

ACCELERATED = "ACCELERATED"
MARGINAL = "MARGINAL"
SLOWER_THAN_CPU = "SLOWER_THAN_CPU"
CPU = "CPU"
WRONG_RESULTS = "WRONG_RESULTS"
UNAVAILABLE = "UNAVAILABLE"
NO_BASELINE = "NO_BASELINE"
NOT_SEEN = "NOT_SEEN"

WORKING = (ACCELERATED, MARGINAL, SLOWER_THAN_CPU, CPU, NO_BASELINE)
ALL = (ACCELERATED, MARGINAL, SLOWER_THAN_CPU, CPU, WRONG_RESULTS, UNAVAILABLE, NO_BASELINE, NOT_SEEN)

STAGE_WORDS = {"correctness": "correctness check", "learning": "learning test", "speed": "speed test",
               "import": "import", "devices": "device discovery", "run": "run"}


def fmt_ips(v: Optional[float]) -> str:
    if v is None:
        return "?"
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def fmt_ratio(v: float) -> str:
    return f"{v:.1f}x" if v >= 0.95 else f"{v:.2f}x"


Number = Union[int, float]


def _num(value: JsonValue) -> Optional[Number]:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _obj(value: JsonValue) -> Optional[JsonObject]:
    return value if isinstance(value, dict) else None


def _said(value: JsonValue) -> Optional[str]:
    """A message of a stage record (error, failure message) as a sentence shows it; None when empty."""
    return None if not value else value if isinstance(value, str) else str(value)


@dataclass(frozen=True)
class Correctness:
    """The correctness stage: loss and gradients against the CPU reference (payload/_harness.py)."""

    error: Optional[str] = None
    nan: bool = False
    passed: bool = False
    loss_rel_err: Optional[Number] = None
    loss_rtol: Optional[Number] = None
    grad_rel_err: Optional[Number] = None
    grad_rtol: Optional[Number] = None

    @classmethod
    def of(cls, rec: JsonObject) -> "Correctness":
        return cls(error=_said(rec.get("error")), nan=bool(rec.get("nan")), passed=bool(rec.get("passed")),
                   loss_rel_err=_num(rec.get("loss_rel_err")), loss_rtol=_num(rec.get("loss_rtol")),
                   grad_rel_err=_num(rec.get("grad_rel_err")), grad_rtol=_num(rec.get("grad_rtol")))


@dataclass(frozen=True)
class Learning:
    """The learning stage: held-out accuracy after a short training on the synthetic task."""

    error: Optional[str] = None
    nan: bool = False
    passed: bool = False
    accuracy: Optional[Number] = None
    steps: Optional[Number] = None
    seconds: Optional[Number] = None
    target: Number = 0

    @classmethod
    def of(cls, rec: JsonObject) -> "Learning":
        return cls(error=_said(rec.get("error")), nan=bool(rec.get("nan")), passed=bool(rec.get("passed")),
                   accuracy=_num(rec.get("accuracy")), steps=_num(rec.get("steps")),
                   seconds=_num(rec.get("seconds")), target=_num(rec.get("target")) or 0)


@dataclass(frozen=True)
class Speed:
    """The speed stage: training images per second, and the epoch time it implies."""

    error: Optional[str] = None
    nan: bool = False
    images_per_s: Optional[Number] = None
    seconds_per_epoch: Number = 0

    @classmethod
    def of(cls, rec: JsonObject) -> "Speed":
        return cls(error=_said(rec.get("error")), nan=bool(rec.get("nan")), images_per_s=_num(rec.get("images_per_s")),
                   seconds_per_epoch=_num(rec.get("seconds_per_epoch")) or 0)


@dataclass(frozen=True)
class Failure:
    """How the child ended when it did not finish (crash, hang, NaN), in words."""

    message: Optional[str]
    nan: bool = False


@dataclass(frozen=True)
class Measured:
    """What a verdict reads of one device result: which device, its kind, and the stage records."""

    framework: Optional[str]
    device: Optional[str]
    kind: Optional[str] = None
    cpu_note: Optional[str] = None
    failure: Optional[Failure] = None
    correctness: Optional[Correctness] = None
    learning: Optional[Learning] = None
    speed: Optional[Speed] = None

    @property
    def label(self) -> str:
        return f"{self.framework} {self.device}"

    @classmethod
    def of(cls, rec: Mapping[str, JsonValue]) -> "Measured":
        """From a device result's record (runner.device_record; the verify document's `results`)."""
        fail = rec.get("failure")
        failure = None
        if isinstance(fail, dict) and fail:
            failure = Failure(message=_said(fail.get("message")), nan=bool(fail.get("nan")))
        elif fail:
            failure = Failure(message=str(fail))
        c, lr, sp = _obj(rec.get("correctness")), _obj(rec.get("learning")), _obj(rec.get("speed"))
        fw, dev, kind, note = rec.get("framework"), rec.get("device"), rec.get("kind"), rec.get("cpu_note")
        return cls(framework=None if fw is None else str(fw), device=None if dev is None else str(dev),
                   kind=kind if isinstance(kind, str) else None, cpu_note=_said(note), failure=failure,
                   correctness=None if c is None else Correctness.of(c),
                   learning=None if lr is None else Learning.of(lr), speed=None if sp is None else Speed.of(sp))


@dataclass(frozen=True)
class CpuBaseline:
    """A CPU figure a device is measured against: images per second, and the framework behind it."""

    images_per_s: Optional[Number]
    framework: Optional[str] = None

    @classmethod
    def of(cls, rec: Optional[Mapping[str, JsonValue]]) -> "CpuBaseline":
        """From a CPU figure's record (runner: the framework's own CPU run, the best CPU figure)."""
        if not rec:
            return cls(None)
        fw = rec.get("framework")
        return cls(_num(rec.get("images_per_s")), fw if isinstance(fw, str) else None)


def _stage_problem(m: Measured) -> Optional[Tuple[str, str]]:
    label = m.label
    c = m.correctness
    if c is not None:
        if c.error:
            return UNAVAILABLE, f"{label} failed its correctness check: {c.error}"
        if c.nan:
            return WRONG_RESULTS, f"{label} returned NaN for the loss or gradients (the CPU did not)"
        if not c.passed:
            parts = []
            if c.loss_rel_err is not None and c.loss_rel_err > (c.loss_rtol or 0):
                parts.append(f"loss differs from the CPU reference by {c.loss_rel_err:.2g} "
                             f"(tolerance {c.loss_rtol or 0:g})")
            if c.grad_rel_err is not None and c.grad_rel_err > (c.grad_rtol or 0):
                parts.append(f"gradients differ by {c.grad_rel_err:.2g} (relative L2, tolerance "
                             f"{c.grad_rtol or 0:g})")
            return WRONG_RESULTS, f"{label}: " + ("; ".join(parts) or "results differ from the CPU reference")
    lr = m.learning
    if lr is not None:
        if lr.error:
            return UNAVAILABLE, f"{label} failed the learning test: {lr.error}"
        if lr.nan:
            return WRONG_RESULTS, f"{label}: the training loss became NaN on the synthetic task"
        if not lr.passed:
            return WRONG_RESULTS, (f"{label} did not learn: {100 * (lr.accuracy or 0):.0f}% held-out accuracy after "
                                   f"{lr.steps} steps ({lr.seconds} s), target "
                                   f"{100 * lr.target:.0f}% (chance is 10%)")
    sp = m.speed
    if sp is not None:
        if sp.error:
            return UNAVAILABLE, f"{label} failed the speed test: {sp.error}"
        if sp.nan:
            return WRONG_RESULTS, f"{label}: the training loss became NaN during the speed test"
    return None


def decide(rec: Mapping[str, JsonValue], framework_cpu: Optional[Mapping[str, JsonValue]],
           best_cpu: Optional[Mapping[str, JsonValue]]) -> Tuple[str, str]:
    """(verdict, reason) for one device record (see runner.device_record for its shape) and the CPU
    figures' records: read once here, judged by `judge`."""
    return judge(Measured.of(rec), CpuBaseline.of(framework_cpu), CpuBaseline.of(best_cpu))


def judge(m: Measured, framework_cpu: CpuBaseline, best_cpu: CpuBaseline) -> Tuple[str, str]:
    """(verdict, reason) for one measured device against its framework's CPU figure and the best one."""
    label = m.label
    fail = m.failure
    if fail is not None:
        if fail.nan:
            return WRONG_RESULTS, f"{label}: {fail.message}"
        return UNAVAILABLE, f"{label}: {fail.message}"
    problem = _stage_problem(m)
    if problem:
        return problem
    sp = m.speed or Speed()
    ips = sp.images_per_s
    if not ips:
        return UNAVAILABLE, f"{label}: no speed figure was measured"
    best_ips = best_cpu.images_per_s
    best_name = best_cpu.framework
    if m.kind == "cpu":
        what = m.cpu_note or f"{label} is the CPU"
        reason = f"{what}: {fmt_ips(ips)} images/s ({sp.seconds_per_epoch:.0f} s per 60,000-image epoch)"
        if best_ips and best_name and best_ips > 1.1 * ips:
            reason += (f"; {best_name} on this CPU reaches {fmt_ips(best_ips)} images/s, "
                       f"{best_ips / ips:.1f}x faster")
        return CPU, reason
    own = framework_cpu.images_per_s
    own_name = f"{m.framework} on the CPU"
    base: Optional[Number]
    if best_ips and own:
        base, base_name = max(best_ips, own), (best_name if best_ips >= own else m.framework)
    else:
        base, base_name = best_ips or own, best_name if best_ips else m.framework
    if not base:
        return NO_BASELINE, f"{label}: {fmt_ips(ips)} images/s, but no CPU figure was measured to compare"
    ratio = ips / base
    head = f"the best CPU figure ({base_name} on this CPU, {fmt_ips(base)} images/s)"
    second = ""
    if own and own != base:
        second = f"; {fmt_ratio(ips / own)} {own_name} ({fmt_ips(own)} images/s)"
    figures = f"{fmt_ips(ips)} images/s{second}"
    if ratio >= ACCELERATED_AT:
        return ACCELERATED, f"{label} is {fmt_ratio(ratio)} {head}: {figures}"
    if ratio >= 1.0:
        return MARGINAL, (f"{label} is only {fmt_ratio(ratio)} {head}, below the {ACCELERATED_AT:g}x bar: "
                          f"{figures}")
    return SLOWER_THAN_CPU, (f"{label} is SLOWER than {head}: {figures}. The CPU is {1 / ratio:.1f}x faster; "
                             f"use {base_name} on the CPU")
