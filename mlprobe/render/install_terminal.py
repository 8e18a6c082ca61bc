"""`mlprobe install` for a person: the steps, the index checks, what would land; progress on stderr
while --apply runs; then where everything went and the verify verdict."""

from __future__ import annotations

import contextlib
import shlex
import sys
import time
from typing import Any, Callable, Iterator, List, Optional

from ..install.apply import ApplyResult, Preflight, Progress
from ..install.index import host_of
from ..model.verify import VerifyResult
from .terminal import human_bytes


def _console(stderr: bool = False) -> Any:
    from ..ui import console

    return console(stderr=stderr)


def ui_safe(text: str) -> str:
    from ..ui import safe_line

    return safe_line(text)


def _esc(text: str) -> str:
    from rich.markup import escape

    return escape(text)


@contextlib.contextmanager
def status_line(enabled: bool = True) -> Iterator[Callable[[str], None]]:
    """A spinner on stderr while the pre-flight checks run (nothing when stderr is not a terminal,
    or with --quiet)."""
    from .. import ui

    con = _console(stderr=True)
    if not enabled or not ui.progress_enabled():
        yield lambda _s: None
        return
    with con.status("preparing") as st:
        yield lambda s: st.update(_esc(s))


def _origin(url: Optional[str]) -> str:
    if not url:
        return ""
    if url.startswith("file:"):
        return "local file"
    return host_of(url)


def render_preflight(pre: Preflight, applying: bool = False) -> None:
    from rich.table import Table

    con = _console()
    plan, env = pre.plan, pre.env
    con.print(f"[bold]mlprobe install[/bold]: recipe [bold]{_esc(plan.recipe)}[/bold]"
              + (f" — {_esc(plan.title)}" if plan.title and plan.title != plan.recipe else ""))
    where = {"new-venv": f"new venv {env.path}", "venv": f"existing venv {env.path}",
             "system": f"the interpreter {env.python} (--system)", "replay": "the replayed machine"}[env.mode]
    con.print(f"  target:  {_esc(where)} ({_esc(env.target.description)})")
    con.print(f"  sources: {_esc(plan.sources.describe())}")
    if pre.backend is not None:
        con.print(f"  installer: {pre.backend.name}")
    con.print("[bold]Steps[/bold]" + ("" if applying else " (nothing is done without --apply)"))
    for i, s in enumerate(pre.steps, 1):
        con.print(f"  {i}. {_esc(s.text)}")
        if s.command:
            if s.kind in ("venv", "install", "env"):
                con.print(f"       [cyan]$ {_esc(s.command)}[/cyan]")
            else:  # a file's content, as it is (never wrapped)
                for line in s.command.rstrip("\n").split("\n"):
                    con.print(f"       [dim]{_esc(line)}[/dim]", soft_wrap=True)
    if plan.commands:
        from ..urls import mask_credentials

        con.print("[bold]By hand[/bold] (the plan's commands for doing this without mlprobe; "
                  + ("--apply carries out the steps above instead, not these)" if not applying
                     else "not run: the steps above are what --apply does)"))
        for cmd in plan.commands:
            con.print(f"  [dim]$ {_esc(mask_credentials(cmd))}[/dim]")
    if pre.checks:
        con.print("[bold]Index checks[/bold]")
        for c in pre.checks:
            mark = "[green]ok[/green]" if c.ok else "[red]FAILED[/red]"
            extra = f" ({c.api}, {c.seconds:.1f} s)" if c.reachable else ""
            con.print(f"  {mark} {_esc(c.requirement)} at {_esc(c.index_url)}: {_esc(c.message)}{extra}")
    elif pre.plan.sources.use_pip_config or pre.plan.sources.no_index:
        con.print("[bold]Index checks[/bold] none: pip's own sources are checked by the resolution below")
    res = pre.resolution
    if res is not None:
        if res.skipped:
            con.print(f"[bold]Resolution[/bold] not tried: {_esc(res.skipped)}")
        elif res.ok:
            how = ("uv pip compile --format pylock.toml" if res.tool == "uv" else "pip install --dry-run --report")
            what = "exactly these will land" if applying else \
                "exactly these would land; nothing was installed"
            t = Table(title=f"Resolution ({how}: {what})", title_justify="left")
            any_size = res.unknown_sizes < len(res.dists)
            cols = ("distribution", "version", "size", "from") if any_size else ("distribution", "version", "from")
            for col in cols:
                t.add_column(col, justify="right" if col == "size" else "left")
            for d in sorted(res.dists, key=lambda d: (not d.requested, d.name.lower())):
                size = [human_bytes(d.size) if d.size is not None else ""] if any_size else []
                t.add_row(d.name + (" *" if d.requested else ""), d.version, *size, _origin(d.url))
            con.print(t)
            if not any_size:
                sizes = "sizes unknown (the sources do not say them)"
            else:
                unknown = f" (+{res.unknown_sizes} of unknown size)" if res.unknown_sizes else ""
                sizes = f"{human_bytes(res.total_size)} of wheels{unknown}"
            con.print(f"  {len(res.dists)} distribution(s), {sizes}; * = asked for; "
                      f"resolved by {res.tool} in {res.seconds:.1f} s")
            if not res.dists:
                con.print("  nothing to install: everything is already there")
    for n in plan.notes:
        con.print(f"[cyan]note:[/cyan] {_esc(n)}")
    for w in plan.warnings:
        con.print(f"[yellow]warning:[/yellow] {_esc(w)}")
    # the problems are errors: the command writes them on stderr (with --apply the first is raised)
    if not applying and pre.ok and env.mode != "replay":
        con.print("[dim]next: the same command with --apply installs it "
                  "(into a new venv unless you pass --venv PATH or --system)[/dim]")


class ApplyProgress(Progress):
    """A rich status line on stderr: the current step and the installer's latest output line, with the
    seconds it has taken. Only on a terminal; piped or redirected, a plain line per step ("... step",
    "done …": no animation) with --verbose only; --quiet says nothing."""

    def __init__(self, enabled: bool = True) -> None:
        from .. import ui

        self.con = _console(stderr=True)
        # A real terminal (FORCE_COLOR makes rich call a pipe a terminal: no animation there); a
        # stderr that is a file or a pipe gets the steps as lines only with --verbose (a log gets
        # the result and the errors, not the progress); --quiet says nothing.
        self.live = enabled and ui.progress_enabled()
        self.enabled = self.live or (enabled and ui.verbose())
        self._status: Any = None
        self._step = ""
        self._t0 = time.perf_counter()
        self._latest = ""

    def __rich__(self) -> str:
        """The status text, drawn at every refresh: the seconds keep counting while pip is quiet (a
        large download with no output line)."""
        text = f"{_esc(self._step)} [dim]({time.perf_counter() - self._t0:.0f} s)"
        return text + (f" {_esc(self._latest)}[/dim]" if self._latest else "[/dim]")

    def step(self, text: str) -> None:
        if not self.enabled:
            return
        self._step = ui_safe(text)
        self._t0 = time.perf_counter()
        self._latest = ""
        if self.live:
            if self._status is None:
                self._status = self.con.status(self)
                self._status.start()
        else:
            self.con.print(f"... {_esc(text)}")

    def line(self, text: str) -> None:
        if not self.enabled or not text.strip():
            return
        if self.live:
            self._latest = ui_safe(text.strip())[:100]

    def done(self, text: str, ok: bool = True) -> None:
        if not self.enabled:
            return
        mark = "[green]done[/green]" if ok else "[yellow]note[/yellow]"
        self.con.print(f"{mark} {_esc(text)}")

    def close(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


def _verify_lines(result: VerifyResult) -> List[str]:
    out = []
    for r in result.results:
        label = f"{r.framework} {r.framework_version or ''} on {r.device}".replace("  ", " ")
        out.append(f"{_esc(ui_safe(label))}: [bold]{_esc(ui_safe(str(r.verdict)))}[/bold]")
    return out


def render_applied(pre: Preflight, result: ApplyResult) -> None:
    con = _console()
    plan = pre.plan
    where = str(result.path) if result.path else result.python
    con.print(f"[green]installed[/green] recipe {_esc(plan.recipe)} into {_esc(where)}")
    if result.activate_scripts:
        names = list(plan.env) + [f"{k} (first: {v})" for k, v in plan.prepend.items()]
        con.print(f"  env vars {_esc(', '.join(names))} are set at every start of its Python (start-up hook; "
                  "MLPROBE_HOOK=0 turns it off) and by its activate scripts")
    elif plan.env and result.path is None:
        con.print("  set these yourself before use (mlprobe does not edit shell rc files):")
        from ..venvconf.activate import shell_lines

        for line in shell_lines(plan.env):
            con.print(f"    [cyan]{_esc(line)}[/cyan]")
    if result.path is not None:
        act = result.path / ("Scripts\\activate" if sys.platform == "win32" else "bin/activate")
        con.print(f"  use it: [cyan]source {_esc(shlex.quote(str(act)))}[/cyan]")
    con.print(f"  transcript: {_esc(str(result.log))}")
    for note in plan.notes:
        if "Fixed inside the environment" in note:
            con.print(f"  [green]device check:[/green] {_esc(note)}")
    if result.device_note:
        con.print(f"[yellow]device check:[/yellow] {_esc(result.device_note)}")
    if result.verify is not None:
        con.print("[bold]Verify[/bold] (in the new environment)")
        try:
            from .verify_terminal import render_verify
        except ImportError:
            render_verify = None  # type: ignore[assignment]
        if render_verify is not None:
            render_verify(result.verify.to_json())
            return
        for line in _verify_lines(result.verify):
            con.print(f"  {line}")
        for line in result.verify.summary:
            con.print(f"  {_esc(str(line))}")
    elif result.verify_error:
        con.print(f"[yellow]verify:[/yellow] {_esc(result.verify_error)}")
