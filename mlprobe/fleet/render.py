"""`mlprobe fleet show`: the fleet report as rich tables (groups, drift, nodes that did not answer,
and every node when the fleet is small)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from .. import ui

# A fleet larger than this shows its groups, drift and problems, not one row per node.
NODE_ROWS = 50
DRIFT_ROWS = 100
# Framework builds named in the groups table (every build is in --json and in drift).
MAIN_FRAMEWORKS = ("torch", "tensorflow", "jax", "jaxlib", "plaidml", "onnxruntime", "onnxruntime-gpu")


def _plan_text(plan: Optional[Dict[str, Any]]) -> str:
    if not plan:
        return "no plan"
    return ", ".join(f"{fw}: {(c or {}).get('recipe') or 'nothing fits'}" for fw, c in plan.items())


def _software_text(software: Dict[str, Any]) -> str:
    def shown(s: Dict[str, Any]) -> str:
        return f"{s['majority']}" + (" (contested)" if s.get("contested") else "")

    bits = []
    for f in ("driver", "cuda", "rocm"):
        s = software.get(f) or {}
        if s.get("majority"):
            bits.append(f"{f} {shown(s)}")
    fws = [shown(s) for k, s in software.items() if k.startswith("framework:") and s.get("majority")]
    main = [b for b in fws if b.split(" ", 1)[0] in MAIN_FRAMEWORKS]
    more = len(fws) - len(main)
    return "; ".join(bits + main + ([f"+{more} more"] if more else [])) or "-"


def render_fleet(doc: Dict[str, Any], console: Any = None, all_rows: bool = False) -> None:
    from rich.table import Table

    doc = ui.deep_safe(doc, markup=True)
    con = console or ui.console()
    s = doc["summary"]
    src = doc.get("source") or {}
    where = f"Ray cluster {src.get('address') or ''}".strip() if src.get("kind") == "ray" else \
        f"{src.get('files', s['nodes'])} report file(s)"
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(s["by_status"].items()))
    con.print(f"[bold]mlprobe fleet[/bold] of {where}: {s['nodes']} node(s) ({statuses or 'none'}), "
              f"{s['groups']} group(s), {s['drift_nodes']} node(s) drifted")

    groups = Table(title="Groups (same hardware)", title_justify="left")
    for col in ("group", "nodes", "hardware", "software (majority)", "plan", "drift", "installed builds"):
        groups.add_column(col)
    for g in doc["groups"]:
        problems = [f"{i['package']} {i.get('version') or ''} {i.get('build') or ''}: {i['status']} x{i['count']}"
                    for i in g["installed"] if i.get("status") != "ok"]
        groups.add_row(g["id"], str(g["count"]), g["label"], _software_text(g["software"]), _plan_text(g["plan"]),
                       str(len(g["drift_nodes"])) if g["drift_nodes"] else "-",
                       "\n".join(problems) or ("ok" if g["installed"] else "-"))
    con.print(groups)

    drift: List[Dict[str, Any]] = doc["drift"]
    if drift:
        t = Table(title="Drift (differs from its group's majority)", title_justify="left")
        for col in ("node", "group", "what", "node has", "group majority"):
            t.add_column(col)
        for d in drift if all_rows else drift[:DRIFT_ROWS]:
            t.add_row(d["node"], d["group"], d["field"].replace("framework:", ""), d["value"] or "(none)",
                      f"{d['majority'] or '(none)'} ({d['majority_nodes']}/{d['group_nodes']})"
                      + (", contested: a tie" if d.get("contested") else ""))
        con.print(t)
        if len(drift) > DRIFT_ROWS and not all_rows:
            con.print(f"... and {len(drift) - DRIFT_ROWS} more drift rows (--all, or --json)")

    nodes: List[Dict[str, Any]] = doc["nodes"]
    bad = [n for n in nodes if n["status"] != "ok"]
    shown = nodes if (all_rows or len(nodes) <= NODE_ROWS) else bad
    if shown:
        t = Table(title="Nodes" if shown is nodes else "Nodes without a report", title_justify="left")
        for col in ("node", "status", "group", "CPU", "GPUs", "driver", "seconds", "error"):
            t.add_column(col)
        for n in shown:
            f = n.get("facts") or {}
            cpu = f.get("cpu") or {}
            gpus = ", ".join(g.get("name") or g.get("vendor") or "?" for g in f.get("gpus") or []) or ("-" if f else "")
            secs = n.get("seconds")
            t.add_row(n["name"], n["status"], n.get("group") or "", cpu.get("model") or "", gpus,
                      f.get("driver") or "", f"{secs:.1f}" if isinstance(secs, (int, float)) else "",
                      n.get("error") or "")
        con.print(t)
    for w in doc.get("warnings") or []:
        con.print(f"warning: {w}")
