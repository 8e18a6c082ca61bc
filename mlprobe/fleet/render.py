"""`mlprobe fleet show`: the fleet report as rich tables (groups, drift, nodes that did not answer,
and every node when the fleet is small)."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from .. import ui
from ..model.jsontypes import JsonObject
from ..model.vocabulary import vocabulary
from .model import SOFTWARE_FIELDS, FleetDocument, PlanChoices, SoftwareField

# A fleet larger than this shows its groups, drift and problems, not one row per node.
NODE_ROWS = 50
DRIFT_ROWS = 100


def _plan_text(plan: Optional[PlanChoices]) -> str:
    if not plan:
        return "no plan"
    return ", ".join(f"{fw}: {(c.recipe if c else None) or 'nothing fits'}" for fw, c in plan.items())


def _software_text(software: Mapping[str, SoftwareField]) -> str:
    def shown(s: SoftwareField) -> str:
        return f"{s.majority}" + (" (contested)" if s.contested else "")

    bits = []
    for f in SOFTWARE_FIELDS:
        s = software.get(f)
        if s is not None and s.majority:
            bits.append(f"{f} {shown(s)}")
    # the builds of the frameworks the registry names for the fleet's view; the rest are counted
    named = set(vocabulary().fleet_builds())
    fws = [shown(s) for k, s in software.items() if k.startswith("framework:") and s.majority]
    main = [b for b in fws if b.split(" ", 1)[0] in named]
    more = len(fws) - len(main)
    return "; ".join(bits + main + ([f"+{more} more"] if more else [])) or "-"


def render_fleet(doc: JsonObject, console: Any = None, all_rows: bool = False) -> None:
    """Print a fleet report (the JSON of `fleet merge|scan`, or a file `fleet show` read); a field of
    the wrong shape is a ContractError (a ValueError) naming it."""
    show_fleet(FleetDocument.from_json(ui.deep_safe(doc, markup=True)), console, all_rows)


def show_fleet(fleet: FleetDocument, console: Any = None, all_rows: bool = False) -> None:
    """The tables of a fleet report whose text is safe to print inside rich markup (ui.deep_safe)."""
    from rich.table import Table

    con = console or ui.console()
    s = fleet.summary
    src = fleet.source
    where = f"Ray cluster {src.address or ''}".strip() if src.kind == "ray" else \
        ui.count(s.nodes if src.files is None else src.files, "report file")
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(s.by_status.items()))
    con.print(f"[bold]mlprobe fleet[/bold] of {where}: {ui.count(s.nodes, 'node')} ({statuses or 'none'}), "
              f"{ui.count(s.groups, 'group')}, {ui.count(s.drift_nodes, 'node')} drifted")

    groups = Table(title="Groups (same hardware)", title_justify="left")
    for col in ("group", "nodes", "hardware", "software (majority)", "plan", "drift", "installed builds"):
        groups.add_column(col)
    for g in fleet.groups:
        problems = [f"{i.package} {i.version or ''} {i.build or ''}: {i.status} x{i.count}"
                    for i in g.installed if i.status != "ok"]
        groups.add_row(g.id, str(g.count), g.label, _software_text(g.software), _plan_text(g.plan),
                       str(len(g.drift_nodes)) if g.drift_nodes else "-",
                       "\n".join(problems) or ("ok" if g.installed else "-"))
    con.print(groups)

    drift = fleet.drift
    if drift:
        t = Table(title="Drift (differs from its group's majority)", title_justify="left")
        for col in ("node", "group", "what", "node has", "group majority"):
            t.add_column(col)
        for d in drift if all_rows else drift[:DRIFT_ROWS]:
            t.add_row(d.node, d.group, d.field.replace("framework:", ""), d.value or "(none)",
                      f"{d.majority or '(none)'} ({d.majority_nodes}/{d.group_nodes})"
                      + (", contested: a tie" if d.contested else ""))
        con.print(t)
        if len(drift) > DRIFT_ROWS and not all_rows:
            con.print(f"... and {len(drift) - DRIFT_ROWS} more drift rows (--all, or --json)")

    nodes = fleet.nodes
    bad = tuple(n for n in nodes if n.status != "ok")
    shown = nodes if (all_rows or len(nodes) <= NODE_ROWS) else bad
    if shown:
        t = Table(title="Nodes" if shown is nodes else "Nodes without a report", title_justify="left")
        for col in ("node", "status", "group", "CPU", "GPUs", "driver", "seconds", "error"):
            t.add_column(col)
        for n in shown:
            f = n.facts
            gpus = (", ".join(g.name or g.vendor or "?" for g in f.gpus) or "-") if f else ""
            secs = n.seconds
            t.add_row(n.name, n.status, n.group or "", (f.cpu.model if f else None) or "", gpus,
                      (f.driver if f else None) or "", f"{secs:.1f}" if secs is not None else "",
                      n.error or "")
        con.print(t)
    for w in fleet.warnings:
        con.print(f"warning: {w}")
