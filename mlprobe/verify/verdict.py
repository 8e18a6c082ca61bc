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

from typing import Any, Dict, Optional, Tuple

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


def _stage_problem(rec: Dict[str, Any], label: str) -> Optional[Tuple[str, str]]:
    c = rec.get("correctness")
    if isinstance(c, dict):
        if c.get("error"):
            return UNAVAILABLE, f"{label} failed its correctness check: {c['error']}"
        if c.get("nan"):
            return WRONG_RESULTS, f"{label} returned NaN for the loss or gradients (the CPU did not)"
        if not c.get("passed"):
            parts = []
            if c.get("loss_rel_err") is not None and c["loss_rel_err"] > c.get("loss_rtol", 0):
                parts.append(f"loss differs from the CPU reference by {c['loss_rel_err']:.2g} "
                             f"(tolerance {c.get('loss_rtol'):g})")
            if c.get("grad_rel_err") is not None and c["grad_rel_err"] > c.get("grad_rtol", 0):
                parts.append(f"gradients differ by {c['grad_rel_err']:.2g} (relative L2, tolerance "
                             f"{c.get('grad_rtol'):g})")
            return WRONG_RESULTS, f"{label}: " + ("; ".join(parts) or "results differ from the CPU reference")
    lr = rec.get("learning")
    if isinstance(lr, dict):
        if lr.get("error"):
            return UNAVAILABLE, f"{label} failed the learning test: {lr['error']}"
        if lr.get("nan"):
            return WRONG_RESULTS, f"{label}: the training loss became NaN on the synthetic task"
        if not lr.get("passed"):
            acc = lr.get("accuracy")
            return WRONG_RESULTS, (f"{label} did not learn: {100 * (acc or 0):.0f}% held-out accuracy after "
                                   f"{lr.get('steps')} steps ({lr.get('seconds')} s), target "
                                   f"{100 * lr.get('target', 0):.0f}% (chance is 10%)")
    sp = rec.get("speed")
    if isinstance(sp, dict):
        if sp.get("error"):
            return UNAVAILABLE, f"{label} failed the speed test: {sp['error']}"
        if sp.get("nan"):
            return WRONG_RESULTS, f"{label}: the training loss became NaN during the speed test"
    return None


def decide(rec: Dict[str, Any], framework_cpu: Optional[Dict[str, Any]],
           best_cpu: Optional[Dict[str, Any]]) -> Tuple[str, str]:
    """(verdict, reason) for one device record (see runner.device_record for its shape)."""
    label = f"{rec.get('framework')} {rec.get('device')}"
    fail = rec.get("failure")
    if fail:
        if fail.get("nan"):
            return WRONG_RESULTS, f"{label}: {fail.get('message')}"
        return UNAVAILABLE, f"{label}: {fail.get('message')}"
    problem = _stage_problem(rec, label)
    if problem:
        return problem
    sp = rec.get("speed") or {}
    ips = sp.get("images_per_s")
    if not ips:
        return UNAVAILABLE, f"{label}: no speed figure was measured"
    best_ips = (best_cpu or {}).get("images_per_s")
    best_name = (best_cpu or {}).get("framework")
    if rec.get("kind") == "cpu":
        what = rec.get("cpu_note") or f"{label} is the CPU"
        reason = f"{what}: {fmt_ips(ips)} images/s ({sp.get('seconds_per_epoch', 0):.0f} s per 60,000-image epoch)"
        if best_ips and best_name and best_ips > 1.1 * ips:
            reason += (f"; {best_name} on this CPU reaches {fmt_ips(best_ips)} images/s, "
                       f"{best_ips / ips:.1f}x faster")
        return CPU, reason
    own = (framework_cpu or {}).get("images_per_s")
    own_name = f"{rec.get('framework')} on the CPU"
    if best_ips and own:
        base, base_name = max(best_ips, own), (best_name if best_ips >= own else rec.get("framework"))
    else:
        base, base_name = best_ips or own, best_name if best_ips else rec.get("framework")
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
