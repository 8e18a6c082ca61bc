"""Terminal output for `mlprobe verify`: live progress on stderr, then one table and plain sentences."""

from __future__ import annotations

import sys
import time
from typing import Any, Dict, List, Optional

from ..verify.verdict import fmt_ips, fmt_ratio

COLOURS = {"ACCELERATED": "bold green", "MARGINAL": "yellow", "SLOWER_THAN_CPU": "bold red",
           "CPU": "cyan", "WRONG_RESULTS": "bold red", "UNAVAILABLE": "dim", "NO_BASELINE": "yellow",
           "NOT_SEEN": "bold red"}
STAGES = {"correctness": "correctness vs CPU", "learning": "learning test", "speed": "speed (batch 128)"}


class Progress:
    """Stage-by-stage progress on stderr: a rich spinner on a terminal, one line per step otherwise."""

    def __init__(self, stream: Optional[Any] = None) -> None:
        from rich.console import Console

        from .. import ui

        self.console = Console(file=stream or sys.stderr, highlight=False)
        # A spinner on a terminal; elsewhere one line per step only with --verbose (a log that is
        # piped or captured gets the result, not the progress); nothing with --quiet.
        self.live = ui.progress_enabled() if stream is None else self.console.is_terminal and not ui.quiet()
        self.lines = ui.verbose()
        self.t0 = time.monotonic()  # the lines say when (a timeline of where verify's time goes)
        self.status: Any = self.console.status("verify: starting") if self.live else None
        if self.status is not None:
            self.status.start()

    def _say(self, text: str, done: bool = False) -> None:
        if self.status is not None:
            self.status.update(f"verify: {text}")
            if done:
                self.console.print(f"  {text}")
        elif done and self.lines:
            self.console.print(f"verify +{time.monotonic() - self.t0:.1f} s: {text}", soft_wrap=True)

    def event(self, ev: Dict[str, Any]) -> None:
        from ..ui import deep_safe

        ev = deep_safe(ev, markup=True)  # from the child: printed inside rich markup
        kind = ev.get("event")
        fw = ev.get("framework", "")
        if kind == "discover":
            self._say(f"looking for frameworks in {ev.get('python')}")
        elif kind == "hello":
            self._say(f"{fw} {ev.get('version') or ''} imported in {ev.get('import_s', 0):.1f} s", done=self.lines)
        elif kind == "stage":
            self._say(f"{fw} {ev.get('device')}: {STAGES.get(ev.get('stage', ''), ev.get('stage'))} ...")
        elif kind == "tick" and self.status is not None:
            if ev.get("stage") == "speed" and ev.get("repeat"):
                self._say(f"{fw}: speed, repeat {ev['repeat']} of {ev.get('of')} ...")
            elif ev.get("stage") == "learning":
                self._say(f"{fw}: learning, {ev.get('steps')} steps, {100 * (ev.get('accuracy') or 0):.0f}% ...")
        elif kind == "result":
            self._say(f"{fw} {ev.get('device')}: {_stage_line(ev.get('stage', ''), ev.get('data') or {})}", done=True)
        elif kind == "fatal":
            self._say(f"{fw}: {ev.get('error')}", done=True)

    def stop(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None


def _stage_line(stage: str, d: Dict[str, Any]) -> str:
    if d.get("error"):
        return f"{STAGES.get(stage, stage)} failed: {d['error']}"
    if stage == "correctness":
        if d.get("nan"):
            return "correctness: NaN"
        ok = "ok" if d.get("passed") else "MISMATCH"
        return (f"correctness {ok} (loss rel. err {d.get('loss_rel_err') or 0:.1e}, "
                f"gradients {d.get('grad_rel_err') or 0:.1e})")
    if stage == "learning":
        acc = d.get("accuracy")
        ok = "ok" if d.get("passed") else "FAILED"
        return f"learning {ok}: {100 * (acc or 0):.0f}% in {d.get('steps')} steps, {_busy_s(d):.2f} s{_paused(d)}"
    if stage == "speed":
        spread = d.get("spread")
        tail = f" (median of {d.get('repeats')}, {100 * spread:.1f}% between the fastest and slowest repeat)" \
            if isinstance(spread, (int, float)) else ""
        load = d.get("machine_load") or {}
        busy = f"; the machine was busy: {load.get('why')}" if isinstance(load, dict) and load.get("busy") else ""
        return f"speed {fmt_ips(d.get('images_per_s'))} images/s{tail}{busy}"
    return stage


def _busy_s(d: Dict[str, Any]) -> float:
    """A learning stage's seconds, less the time its child was paused while another one timed."""
    secs, paused = d.get("seconds"), d.get("paused_s")
    secs = float(secs) if isinstance(secs, (int, float)) else 0.0
    return max(0.0, secs - float(paused)) if isinstance(paused, (int, float)) else secs


def _paused(d: Dict[str, Any]) -> str:
    paused = d.get("paused_s")
    return f" (and {paused:.1f} s paused while another child timed)" if isinstance(paused, (int, float)) and paused >= 0.05 else ""


def _memory(proof: Optional[Dict[str, Any]]) -> str:
    from .terminal import human_bytes

    if not proof:
        return ""
    for key in ("max_memory_allocated_bytes", "memory_allocated_bytes", "peak_rss_bytes"):
        if proof.get(key):
            tag = " RSS" if key == "peak_rss_bytes" else ""
            return human_bytes(int(proof[key])) + tag
    return "n/a"


def rows(doc: Dict[str, Any]) -> List[List[str]]:
    out = []
    for r in doc.get("results", []):
        c, lr, sp = r.get("correctness") or {}, r.get("learning") or {}, r.get("speed") or {}
        corr = "" if not c else ("error" if c.get("error") else "NaN" if c.get("nan") else
                                 "ok" if c.get("passed") else "MISMATCH")
        learn = "" if not lr else ("error" if lr.get("error") else "NaN" if lr.get("nan") else
                                   f"{100 * (lr.get('accuracy') or 0):.0f}% {_busy_s(lr):.1f}s"
                                   + ("" if lr.get("passed") else " FAIL"))
        ips = sp.get("images_per_s") if not sp.get("error") else None
        ratio = r.get("speedup_vs_framework_cpu")
        best = r.get("speedup_vs_best_cpu")
        # the headline is the ratio to the best CPU figure of the run; the framework's own CPU path after it
        vs = ""
        if r.get("kind") != "cpu" and (best or ratio):
            vs = fmt_ratio(best or ratio)
            if ratio and best and abs(ratio - best) > 0.05 * best:
                vs += f" ({fmt_ratio(ratio)} own CPU)"
        if r.get("kind") == "cpu" and best and abs(best - 1.0) > 0.05:
            vs = f"{fmt_ratio(best)} best CPU"
        name = r.get("name") if r.get("name") and r.get("name") != r.get("device") else None
        # a name with its own brackets ("CPU (2 threads)") follows a comma, not more brackets
        device = str(r.get("device")) + ((f", {name}" if "(" in str(name) else f" ({name})") if name else "")
        out.append([
            f"{r.get('framework')} {r.get('framework_version') or ''}".strip(),
            device, str(r.get("verdict")), corr, learn,
            fmt_ips(ips) if ips else "", f"{60000.0 / ips:.0f}" if ips else "",
            vs, _memory(r.get("proof")),
        ])
    return out


def render_verify(doc: Dict[str, Any], stream: Optional[Any] = None) -> None:
    from rich.table import Table

    from ..ui import deep_safe

    doc = deep_safe(doc, markup=True)  # every value is printed inside rich markup
    from ..ui import console

    con = console(file=stream or sys.stdout, highlight=False)
    py = doc.get("python") or {}
    con.print(f"[bold]mlprobe verify[/bold] in {py.get('executable')} (Python {py.get('version')})")
    t = Table(title_justify="left", show_lines=False)
    for col in ("framework", "device", "verdict", "correct", "learns", "images/s", "s/epoch", "vs best CPU",
                "memory"):
        t.add_column(col, justify="right" if col in ("images/s", "s/epoch", "vs best CPU", "memory") else "left",
                     no_wrap=col in ("verdict", "images/s", "s/epoch", "correct"))
    for row in rows(doc):
        row[2] = f"[{COLOURS.get(row[2], '')}]{row[2]}[/]" if COLOURS.get(row[2]) else row[2]
        t.add_row(*row)
    if doc.get("results"):
        con.print(t)
    for line in doc.get("summary", []):
        con.print(f"- {line}")
    for f in doc.get("frameworks", []):
        for u in f.get("unavailable_devices", []):
            if not any(r.get("device") == u.get("id") for r in doc.get("results", [])):
                con.print(f"[dim]- {f['name']} {u.get('id')}: {u.get('reason')}[/dim]")
    tol = doc.get("tolerances") or {}
    if not doc.get("results"):  # nothing ran: no legend for a table that is not there
        return
    con.print(f"[dim]correct = loss within {tol.get('loss_rtol')} and gradients within {tol.get('grad_rtol')} "
              f"(relative) of a float64 CPU reference; learns = {100 * tol.get('learn_target', 0.9):.0f}% on a "
              f"seeded synthetic task; speed = Keras-MNIST CNN, batch {tol.get('speed_batch')}, median of "
              f"repeats after warm-up; ACCELERATED = at least {tol.get('accelerated_at')}x the best CPU "
              f"figure of this run (any framework on this CPU). {doc.get('wall_s')} s.[/dim]")
