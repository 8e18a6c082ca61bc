"""The plan for a person: what to install first (exact commands), then what does not fit and why."""

from __future__ import annotations

import re
from typing import Any, Dict, List

from rich.console import Console
from rich.table import Table

_STATUS_STYLE = {
    "maintained": "green",
    "preview": "yellow",
    "paused": "red",
    "unmaintained": "red",
    "retired": "dim",
}
_FINDING_STYLE = {"ok": "green", "info": "cyan", "problem": "bold red"}


def _console() -> Console:
    from ..ui import console

    con: Console = console()
    return con


def _status(s: str) -> str:
    return f"[{_STATUS_STYLE.get(s, 'white')}]{s}[/]"


def version_said(e: Dict[str, Any]) -> str:
    """The version line of a recommendation: the version when its commands pin it (`torch==2.9.*`),
    else what an unpinned command really gets: the newest the index serves (the knowledge's newest
    row is named, as what mlprobe knew, not as a promise)."""
    version = str(e.get("version") or "")
    pinned = any(re.search(r"(==|~=|<=?|>=?)\s*v?" + re.escape(version) + r"(\b|\.|$)", str(p))
                 for p in e.get("packages") or [])
    if pinned:
        return version
    return f"the latest the index serves (not pinned; mlprobe knows up to {version})"


def render_gpu_use(uses: List[Dict[str, Any]], con: Any) -> None:
    """`GPUs: torch-cuda uses 4 of 4 (cuda:0…cuda:3): ...` per framework with a GPU recipe."""
    seen = set()
    for u in uses:
        key = (u.get("recipe"), u.get("how"), tuple(u.get("visible") or []))
        if key in seen:  # two frameworks planned onto one recipe (keras -> tensorflow-cuda): said once
            continue
        seen.add(key)
        n, total = len(u.get("visible") or []), u.get("gpus") or 0
        which = f"{n} of {total}" if n != total else f"all {total}" if total > 1 else "the GPU"
        con.print(f"[bold]GPUs:[/bold] {u.get('recipe')} uses {which}"
                  + (f" (nvidia-smi/rocm GPU {', '.join(str(i) for i in u['visible'])})" if n != total and n else "")
                  + f"; {u.get('how')}")
        for note in u.get("notes") or []:
            con.print(f"    [yellow]![/yellow] {note}")


def replay_flag(source: Dict[str, Any]) -> str:
    """` --replay BUNDLE` for a command that should read the same capture again; nothing where the
    capture came from MLPROBE_REPLAY (still set for the next command) or the scan is live."""
    if source.get("kind") != "replay" or source.get("via"):
        return ""
    from ..model import shell

    return " --replay " + shell.posix([str(source.get("bundle") or "BUNDLE")])


def next_hint(source: Dict[str, Any]) -> str:
    """The last line of a plan: what to run next, and where. A replayed plan is for the captured
    machine: install and verify run there; here, the same capture shows the install steps and one
    recipe's reasons."""
    if source.get("kind") != "replay":
        return ("next: `mlprobe install --recipe ID` to install, `mlprobe verify` to measure, "
                "`mlprobe plan --why-not ID` for one recipe")
    flag = replay_flag(source)
    here = "here (MLPROBE_REPLAY is set)" if source.get("via") else "here"
    return ("next, on the captured machine: `mlprobe install --recipe ID --apply`, then `mlprobe verify`; "
            f"{here}: `mlprobe install{flag} --recipe ID` shows the steps for it, "
            f"`mlprobe plan{flag} --why-not ID` explains one recipe")


def render_plan(plan: Dict[str, Any], console: Any = None) -> None:
    from ..ui import deep_safe

    # text from captures: control characters shown escaped, rich markup in it shown as text (every
    # value and key, once, here: nothing below escapes again)
    plan = deep_safe(plan, markup=True)
    con = console or _console()
    t = plan["target"]
    source = plan.get("source") or {}
    replayed = source.get("kind") == "replay"
    where = "replayed bundle" if replayed else "this machine"
    machine = "the captured machine" if replayed else "this machine"
    there = " (on the captured machine)" if replayed else ""
    con.print(
        f"[bold]mlprobe plan[/bold] for {where}: {t.get('os') or 'OS unknown'}"
        + (" (WSL2)" if t.get("wsl") else "")
        + f", {t.get('arch') or 'CPU unknown'}, "
        f"Python {t.get('python') or 'unknown'}"
        + (f" ({t['python_source']})" if t.get("python_source") else "")
    )
    for w in plan.get("warnings", []):
        con.print(f"[yellow]note:[/yellow] {w}")

    tops = {fw: rid for fw, rid in (plan.get("top") or {}).items()}
    if tops:
        con.print(
            "[bold]Best fit:[/bold] "
            + "; ".join(
                f"{fw} -> [bold]{rid}[/bold]" if rid else f"{fw} -> [red]nothing fits[/red]"
                for fw, rid in tops.items()
            )
        )
    if plan.get("ranking"):
        con.print(f"[bold]Ranking:[/bold] {plan['ranking']}")

    render_gpu_use(plan.get("gpu_use") or [], con)

    problems = [f for f in plan.get("installed", []) if f["status"] == "problem"]
    for f in plan.get("installed", []):
        style = _FINDING_STYLE.get(f["status"], "white")
        con.print(f"[{style}]installed {f['status']}:[/] {f['message']}")
        for r in f.get("reasons", []):
            con.print(f"    - {r}")
        for c in f.get("fix", []):
            con.print(f"    [bold]fix{there}:[/bold] {c}")
    if problems:
        con.print()

    if not plan["recommended"]:
        con.print(
            f"[bold red]No recipe fits {machine}[/bold red] for "
            f"--framework {plan['framework']}; see the reasons below."
        )
    for i, e in enumerate(plan["recommended"], 1):
        head = (
            f"[bold]{i}. {e['recipe']}[/bold]  {e['title']}  "
            f"[dim]({e['framework']}, {e['backend']}, {_status(e['status'])}[dim], score {e['score']})[/dim]"
        )
        lines: List[str] = []
        if e.get("device_name"):
            lines.append(f"device: {e['device_name']}")
        if e.get("version"):
            lines.append(f"version: {version_said(e)}" + (f"   index: {e['index']}" if e.get("index") else ""))
        for p in e.get("prerequisites", []):
            lines.append(f"[bold]first:[/bold] {p}")
        for c in e["commands"]:
            lines.append(f"[bold cyan]$ {c}[/bold cyan]")
        for w in e["warnings"]:
            lines.append(f"[yellow]! {w}[/yellow]")
        if e.get("unknown"):
            lines.append(
                "[dim]not checked (not in the capture): " + "; ".join(e["unknown"]) + "[/dim]"
            )
        for n in e.get("notes", []):
            lines.append(f"[dim]{n}[/dim]")
        verify = e.get("verify") or {}
        lines.append(
            f"[dim]verify{there}: mlprobe verify --framework {verify.get('framework')} "
            f"--device {verify.get('device')}[/dim]"
        )
        # every recipe drawn alike, with no box: a box breaks a command that is wider than it
        # and cuts its title at the width; the first recommendation stands out by its colour
        con.print(head.replace("[bold]", "[bold green]" if i == 1 else "[bold]", 1)
                  .replace("[/bold]", "[/bold green]" if i == 1 else "[/bold]", 1))
        for ln in lines:
            con.print("    " + ln)

    live = [r for r in plan["rejected"] if r["status"] != "retired"]
    if live:
        tab = Table(title="Does not fit", title_justify="left", show_lines=False, expand=False)
        tab.add_column("recipe", no_wrap=True)
        tab.add_column("why not")
        for r in live:
            tab.add_row(
                f"{r['recipe']}\n[dim]{r['backend']}, {_status(r['status'])}[/dim]",
                "\n".join(f"- {x}" for x in r["reasons"]),
            )
        con.print(tab)
    for r in plan.get("retired", []):
        if r.get("relevant"):
            # one line: what replaced it; the history is `--why-not ID`'s
            today = (r.get("successor") or "").split(". ")[0].split(" [")[0].rstrip(".")
            con.print(f"[dim]retired:[/dim] [bold]{r['recipe']}[/bold] ({r['title']}); today: {today} "
                      f"[dim](`mlprobe plan --why-not {r['recipe']}`)[/dim]")
    others = [r["recipe"] for r in plan.get("retired", []) if not r.get("relevant")]
    if others:
        con.print(f"[dim]also retired (mlprobe plan{replay_flag(source)} --why-not ID): {', '.join(others)}[/dim]")
    con.print(f"[dim]{next_hint(source)}[/dim]")


def render_why_not(doc: Dict[str, Any], console: Any = None) -> None:
    from ..ui import deep_safe

    doc = deep_safe(doc, markup=True)
    con = console or _console()
    verdict = doc["verdict"]
    style = {"fits": "green", "rejected": "red", "retired": "yellow"}.get(verdict, "white")
    con.print(
        f"[bold]{doc['recipe']}[/bold] {doc['title']} [dim]({doc['framework']}, {doc['backend']}, "
        f"{doc['status']})[/dim]: [{style}]{verdict}[/]"
    )
    if doc.get("summary"):
        con.print(doc["summary"])
    if verdict == "fits":
        e = doc["entry"]
        con.print(f"ranked {doc['rank']} of the recipes that fit (score {e['score']})")
        for c in e["commands"]:
            con.print(f"[bold cyan]$ {c}[/bold cyan]")
        for w in e["warnings"]:
            con.print(f"[yellow]! {w}[/yellow]")
    else:
        for r in doc.get("reasons", []):
            con.print(f"- {r}")
    variants = doc.get("variants") or []
    if variants:
        tab = Table(title="builds tried, in order of preference", title_justify="left")
        tab.add_column("build", no_wrap=True)
        tab.add_column("fits")
        tab.add_column("why not")
        for v in variants:
            mark = {True: "[green]yes[/green]", False: "[red]no[/red]", None: "[yellow]unknown[/yellow]"}[
                v["fits"]
            ]
            tab.add_row(v["label"], mark, "\n".join(v["reasons"]))
        con.print(tab)
    con.print(
        "[dim]sources: "
        + "; ".join(f"{s['id']}: {s['reference']}" for s in doc.get("sources", []))
        + "[/dim]"
    )
