"""`mlprobe fleet show FILE --html OUT`: one self-contained page (inline CSS and SVG, no script, no
font, no network; a Content-Security-Policy forbids loading anything) with the groups, the drift
highlighted, the nodes without a report, and a chart of verify speeds per device where the reports
carry them."""

from __future__ import annotations

import math

import statistics
from html import escape
from typing import Dict, List, Optional, Tuple

from ..model.jsontypes import JsonObject
from ..ui import safe
from .model import Drift, FleetDocument, Group, PlanChoices

NODE_ROWS = 200
CONTESTED = (' <span class="badge bad" title="a tie: no value has more than half of the group">'
             'contested</span>')

CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em;color:#1d1d1f;background:#fff}
h1{font-size:1.5em;margin:0 0 .2em}h2{font-size:1.15em;margin:1.6em 0 .4em}
.sub{color:#555;margin:0 0 1em}
table{border-collapse:collapse;margin:.3em 0 1em;width:100%}
th,td{border:1px solid #d0d0d7;padding:.3em .5em;text-align:left;vertical-align:top}
th{background:#f2f2f6}
tr.drift td,td.drift{background:#fff1c2}
tr.bad td{background:#fde2e1}
.badge{display:inline-block;border-radius:.8em;padding:0 .5em;font-size:.85em;background:#e8e8ee}
.badge.drift{background:#f5b400;color:#000}.badge.bad{background:#d93025;color:#fff}.badge.ok{background:#1e8e3e;color:#fff}
code{white-space:nowrap;font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.92em}
svg text{font:12px system-ui,sans-serif}
"""


def _e(v: object) -> str:
    """Text for the page: control characters and bidirectional controls written as visible escapes
    (U+202E in a node name would reverse what follows it), then HTML-escaped."""
    return escape(safe("" if v is None else str(v)), quote=True)


def _plan(plan: Optional[PlanChoices]) -> str:
    if not plan:
        return "<em>no plan</em>"
    rows = []
    for fw, c in plan.items():
        if c:
            extra = f" <code>{_e(' '.join(f'{k}={v}' for k, v in c.env.items()))}</code>" if c.env else ""
            rows.append(f"{_e(fw)}: <b>{_e(c.recipe)}</b>{extra}")
        else:
            rows.append(f"{_e(fw)}: <em>nothing fits</em>")
    return "<br>".join(rows)


def _software(g: Group) -> str:
    out = []
    for field, s in g.software.items():
        if s.majority is None and s.variants == 1:
            continue
        name = field.replace("framework:", "")
        mark = f' <span class="badge drift">{s.variants - 1} other</span>' if s.variants > 1 else ""
        if s.contested:
            mark += CONTESTED

        head = "" if field.startswith("framework:") and s.majority else f"{_e(name)}: "
        out.append(f"{head}<code>{_e(s.majority or '(none)')}</code> "
                   f"({_e(s.nodes)}/{_e(g.count)}){mark}")
    return "<br>".join(out) or "-"


def speed_rows(fleet: FleetDocument) -> List[Tuple[str, float, float, float, int]]:
    """(label, median, min, max, nodes) of verify images/s per device, over the nodes that carry them:
    one bar per group, framework and device."""
    acc: Dict[str, List[float]] = {}
    group_label = {g.id: g.label for g in fleet.groups}
    for n in fleet.nodes:
        for v in n.facts.verify if n.facts else ():
            ips = v.images_per_s
            if ips is None or ips <= 0:
                continue
            hw = group_label.get(n.group or "", "")
            label = f"{v.framework or '?'} {v.device or '?'}: {v.name or ''}"
            if hw:
                label += f" [{hw.split(';')[-1].strip()}]"
            acc.setdefault(label, []).append(float(ips))
    rows = [(k, statistics.median(vs), min(vs), max(vs), len(vs)) for k, vs in acc.items()]
    return sorted(rows, key=lambda r: -r[1])


def _num(v: float) -> str:
    return f"{v:,.0f}" if v < 1e12 else f"{v:.3g}"


def speed_chart(rows: List[Tuple[str, float, float, float, int]]) -> str:
    """Horizontal bars (median images/s) with a min-max whisker, as inline SVG."""
    if not rows:
        return "<p>No report carries verify speeds (run `mlprobe fleet scan --verify`, or merge reports " \
               "made with `mlprobe report --verify`).</p>"
    # a report may carry any finite number (1.7e308 images/s): each length is a fraction of the
    # largest value first, then scaled, so nothing overflows to inf in the page
    rows = [r for r in rows if all(math.isfinite(v) and v >= 0 for v in r[1:4])]
    if not rows:
        return "<p>No report carries a usable verify speed.</p>"
    label_w, bar_w, row_h, top = 420, 460, 26, 24
    vmax = max(r[3] for r in rows) or 1.0
    height = top + row_h * len(rows) + 10
    width = label_w + bar_w + 160
    parts = [f'<svg id="speed-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="verify speed per device, images per second">',
             f'<text x="{label_w}" y="14" fill="#555">images/s (Keras-MNIST CNN, batch 128; bar: median, '
             f'line: min-max over nodes)</text>']
    for i, (label, med, lo, hi, n) in enumerate(rows):
        y = top + i * row_h
        w = max(1.0, bar_w * (med / vmax))
        x_lo, x_hi = label_w + bar_w * (lo / vmax), label_w + bar_w * (hi / vmax)
        short = label if len(label) <= 64 else label[:61] + "..."
        parts.append(f'<g class="bar"><title>{_e(label)}: median {_num(med)} images/s over {n} node(s)</title>'
                     f'<text x="{label_w - 8}" y="{y + 15}" text-anchor="end">{_e(short)}</text>'
                     f'<rect x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{row_h - 8}" fill="#4a7bd0"/>'
                     f'<line x1="{x_lo:.1f}" x2="{x_hi:.1f}" y1="{y + row_h / 2 - 1:.1f}" y2="{y + row_h / 2 - 1:.1f}" '
                     f'stroke="#111" stroke-width="1.5"/>'
                     f'<text x="{label_w + w + 6:.1f}" y="{y + 15}" class="value">{_num(med)}'
                     f'{f" (n={n})" if n > 1 else ""}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def render_html(doc: JsonObject) -> str:
    """The page of a fleet report (the JSON of `fleet merge|scan`, or a file `fleet show` read); a field
    of the wrong shape is a ContractError (a ValueError) naming it."""
    return fleet_page(FleetDocument.from_json(doc))


def fleet_page(fleet: FleetDocument) -> str:
    s = fleet.summary
    src = fleet.source
    where = f"Ray cluster {src.address or ''}" if src.kind == "ray" else \
        f"{s.nodes if src.files is None else src.files} report file(s)"
    drift_by_node: Dict[str, List[Drift]] = {}
    for d in fleet.drift:
        drift_by_node.setdefault(d.node, []).append(d)
    out = ["<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
           "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
           "img-src data:\">",
           "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
           f"<title>mlprobe fleet: {_e(s.nodes)} nodes</title><style>{CSS}</style></head><body>",
           f"<h1>mlprobe fleet</h1><p class=\"sub\" id=\"summary\">{_e(where)}: <b>{_e(s.nodes)}</b> node(s) "
           f"({_e(', '.join(f'{k} {v}' for k, v in sorted(s.by_status.items())))}), "
           f"<b>{_e(s.groups)}</b> group(s), <b>{_e(s.drift_nodes)}</b> node(s) drifted. "
           f"Generated {_e(fleet.generated_at)} by mlprobe {_e(fleet.mlprobe_version)}.</p>"]

    out.append("<h2>Groups (same hardware)</h2><table id=\"groups\"><thead><tr><th>group</th><th>nodes</th>"
               "<th>hardware</th><th>software (group majority)</th><th>plan</th><th>drift</th>"
               "<th>installed builds</th></tr></thead><tbody>")
    for g in fleet.groups:
        nd = len(g.drift_nodes)
        drift_cell = f'<span class="badge drift">{nd} drifted</span>' if nd else '<span class="badge ok">none</span>'
        installed = "<br>".join(
            f"{_e(i.package)} {_e(i.version)} {_e(i.build or '')}: "
            f"<span class=\"badge {'ok' if i.status == 'ok' else 'bad'}\">{_e(i.status)}</span> "
            f"x{_e(i.count)}" for i in g.installed) or "-"
        row_class = ' class="drift"' if nd else ""
        out.append(f"<tr id=\"{_e(g.id)}\"{row_class}><td><code>{_e(g.id)}</code></td>"
                   f"<td>{_e(g.count)}</td><td>{_e(g.label)}</td><td>{_software(g)}</td>"
                   f"<td>{_plan(g.plan)}</td><td>{drift_cell}</td><td>{installed}</td></tr>")
    out.append("</tbody></table>")

    out.append("<h2>Drift</h2>")
    if fleet.drift:
        out.append("<table id=\"drift\"><thead><tr><th>node</th><th>group</th><th>what</th><th>node has</th>"
                   "<th>group majority</th></tr></thead><tbody>")
        for d in fleet.drift:
            out.append(f"<tr class=\"drift\"><td>{_e(d.node)}</td><td><code>{_e(d.group)}</code></td>"
                       f"<td>{_e(d.field.replace('framework:', ''))}</td><td><code>{_e(d.value or '(none)')}"
                       f"</code></td><td><code>{_e(d.majority or '(none)')}</code> ({_e(d.majority_nodes)}/"
                       f"{_e(d.group_nodes)}){CONTESTED if d.contested else ''}</td></tr>")
        out.append("</tbody></table>")
    else:
        out.append("<p id=\"drift\">No node differs from its group's majority.</p>")

    out.append("<h2>Verify speed per device</h2>")
    out.append(speed_chart(speed_rows(fleet)))

    nodes = fleet.nodes
    shown = nodes if len(nodes) <= NODE_ROWS else tuple(n for n in nodes
                                                        if n.status != "ok" or n.name in drift_by_node)
    out.append(f"<h2>Nodes{'' if shown is nodes else ' that drifted or have no report'}</h2>")
    out.append("<table id=\"nodes\"><thead><tr><th>node</th><th>status</th><th>group</th><th>CPU</th><th>GPUs</th>"
               "<th>driver</th><th>error</th></tr></thead><tbody>")
    for n in shown:
        f = n.facts
        cls = "bad" if n.status != "ok" else ("drift" if n.name in drift_by_node else "")
        badge = "ok" if n.status == "ok" else "bad"
        gpus = ", ".join(str(g.name or g.vendor or "?") for g in f.gpus) if f else ""
        row_class = f' class="{cls}"' if cls else ""
        out.append(f"<tr{row_class}><td>{_e(n.name)}</td>"
                   f"<td><span class=\"badge {badge}\">{_e(n.status)}</span></td><td><code>{_e(n.group or '')}"
                   f"</code></td><td>{_e(f.cpu.model if f else None)}</td><td>{_e(gpus)}</td>"
                   f"<td>{_e(f.driver if f else None)}</td><td>{_e(n.error)}</td></tr>")
    out.append("</tbody></table>")
    for w in fleet.warnings:
        out.append(f"<p class=\"warning\">warning: {_e(w)}</p>")
    out.append("</body></html>\n")
    return "".join(out)
