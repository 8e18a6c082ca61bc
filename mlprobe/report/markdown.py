"""The report as a GitHub comment: a short summary table, then the details in collapsible
<details> sections. It stays under GitHub's 65,536-character comment limit: raw captures are
trimmed first (large ones cut, the smallest kept whole), then the JSON details are compacted or
left out, and the comment says what it trimmed."""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..ui import json_safe, safe

GITHUB_COMMENT_LIMIT = 65536
SAFETY_MARGIN = 512  # GitHub may count differently than Python; stay clear of the edge
MIN_RAW_SHOWN = 400  # a capture cut shorter than this is left out instead


def comment_size(text: str) -> int:
    """Characters as a browser counts them (UTF-16 code units): never less than len(text)."""
    return len(text.encode("utf-16-le")) // 2


# -- summary ---------------------------------------------------------------------------------------


def _html_safe(text: str) -> str:
    """Placeholders like <user-1> must show, not vanish as unknown HTML tags; control characters and
    escape sequences from captures are written as escapes (printed on a terminal, they would act)."""
    from ..ui import safe

    return safe(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


MAX_CELL = 300  # characters of one summary cell
MAX_ROWS = {"GPU": 16, "Warning": 8, "Verify": 16, "Installed": 8, "USB accelerator": 8}
# Where mlprobe itself wants bold in a summary line (`**x86-64-v4**`): every other `*` is a fact's.
BOLD = "\ue000"
# What Markdown (GitHub's flavour) reads as markup in running text: links and images ([...]),
# emphasis (* and _ at a word's edge), strikethrough (~), code (`), a table's cell edge (|), the
# escape itself (\\), and @-mentions and e-mail autolinks (@). HTML is written as entities.
_MD_MARKUP = re.compile(r"[\\`*\[\]~|@]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def md_text(text: Any) -> str:
    """Text from a machine or a document, as Markdown that shows it and does nothing else: a value such
    as `![x](https://…)` is not an image that loads when the ticket is viewed, a bare URL or `www.` is
    not a link, `@name` notifies nobody."""
    s = _MD_MARKUP.sub(lambda m: "\\" + m.group(0), _html_safe(str(text)))
    s = s.replace("://", ":\\/\\/")  # GitHub links bare URLs; an escaped slash ends that
    return re.sub(r"(?i)\bwww\.", lambda m: m.group(0)[:-1] + "\\.", s)


def md_code(text: Any) -> str:
    """A value as a code span that it cannot end: the fence is one backtick longer than the longest
    run of backticks in it (CommonMark), padded where the value starts or ends with one."""
    body = " ".join(_html_safe(str(text)).split())
    runs = [len(r) for r in re.findall(r"`+", body)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def _cell(value: Any) -> str:
    s = " ".join(str(value).split())
    if len(s) > MAX_CELL:
        s = s[: MAX_CELL - 1] + "…"
    return md_text(s).replace(BOLD, "**") or "—"


def _capped(rows: List[Tuple[str, str]]) -> List[Tuple[str, str]]:
    """At most MAX_ROWS rows of each kind; the rest is in the JSON details."""
    seen: Dict[str, int] = {}
    out: List[Tuple[str, str]] = []
    for key, value in rows:
        kind = "GPU" if key.startswith("GPU") else key
        seen[kind] = seen.get(kind, 0) + 1
        limit = MAX_ROWS.get(kind)
        if limit is None or seen[kind] <= limit:
            out.append((key, value))
        elif seen[kind] == limit + 1:
            out.append((kind, "… more in the JSON report"))
    return out


def _gib(n: Any) -> Optional[str]:
    if not isinstance(n, (int, float)) or n <= 0:
        return None
    return f"{n / 1024**3:.1f} GiB" if n >= 1024**3 else f"{n / 1024**2:.0f} MiB"


def os_line(scan: Dict[str, Any]) -> str:
    o = scan.get("os") or {}
    parts = [o.get("distro") or o.get("system") or "unknown OS"]
    if o.get("system") == "Linux" and o.get("release"):
        parts.append(f"kernel {o['release']}")
    if o.get("wsl"):
        parts.append("WSL")
    if o.get("glibc"):
        parts.append(f"glibc {o['glibc']}")
    if o.get("windows_build"):
        parts.append(f"build {o['windows_build']}")
    py = scan.get("python") or {}
    if py.get("version"):
        parts.append(f"Python {py['version']}")
    return ", ".join(str(p) for p in parts)


def cpu_line(scan: Dict[str, Any]) -> str:
    c = scan.get("cpu") or {}
    head = c.get("model") or c.get("vendor") or "unknown CPU"
    bits = [b for b in (c.get("arch"),) if b]
    if c.get("cores") or c.get("threads"):
        from ..render.terminal import count

        cores, threads = c.get("cores"), c.get("threads")
        bits.append(f"{count(cores if isinstance(cores, int) else None, 'core')} / "
                    f"{count(threads if isinstance(threads, int) else None, 'thread')}")
    if c.get("x86_64_level"):
        bits.append(f"{BOLD}x86-64-v{c['x86_64_level']}{BOLD}")
    flags = set(c.get("flags") or [])
    shown = [
        f
        for f in (
            "avx",
            "avx2",
            "fma",
            "avx512f",
            "avx512_bf16",
            "avx512_fp16",
            "amx_tile",
            "neon",
            "asimd",
            "sve",
        )
        if f in flags
    ]
    if c.get("arch") == "x86_64" and flags and "avx" not in flags:
        shown.insert(0, f"{BOLD}no AVX{BOLD}")
    line = f"{head}" + (f" ({', '.join(str(b) for b in bits)})" if bits else "")
    return line + (f"; {' '.join(shown)}" if shown else "")


def gpu_line(g: Dict[str, Any]) -> str:
    bits = []
    if g.get("driver_version"):
        bits.append(f"driver {g['driver_version']}")
    if g.get("compute_capability"):
        bits.append(f"CC {g['compute_capability']}")
    gfx = g.get("gfx_target")
    if gfx:
        rt = g.get("runtime_gfx_target")
        bits.append(gfx + (f" (runs as {rt})" if rt and rt != gfx else ""))
    if g.get("architecture"):
        bits.append(str(g["architecture"]))
    mem = _gib(g.get("memory_bytes"))
    if mem:
        bits.append(mem)
    elif g.get("integrated"):
        bits.append("integrated")
    if g.get("mig_mode") and str(g["mig_mode"]).lower() == "enabled":
        bits.append(f"MIG on ({g.get('mig_devices') or 0} slices)")
    if g.get("apis"):
        bits.append("/".join(g["apis"]))
    return f"{g.get('name') or g.get('vendor') or 'GPU'}" + (f" — {', '.join(bits)}" if bits else "")


def runtimes_line(scan: Dict[str, Any]) -> Optional[str]:
    rt = scan.get("runtimes") or {}
    out = []
    for key, label in (("cuda", "CUDA"), ("rocm", "ROCm"), ("metal", "Metal"), ("directml", "DirectML")):
        v = rt.get(key)
        if isinstance(v, dict):
            ver = v.get("version")
            drv = v.get("driver_version")
            out.append(f"{label} {ver or ''}".strip() + (f" (driver {drv})" if drv and key == "cuda" else ""))
        elif v:
            out.append(f"{label} {v}" if isinstance(v, str) else label)
    ocl = rt.get("opencl")
    if isinstance(ocl, dict):
        names = [str(p.get("name")) for p in ocl.get("platforms") or [] if isinstance(p, dict)]
        out.append("OpenCL: " + (", ".join(names) if names else "no platform"))
    return "; ".join(out) or None


def frameworks_line(scan: Dict[str, Any]) -> Optional[str]:
    out = []
    for f in scan.get("frameworks") or []:
        if isinstance(f, dict) and f.get("name"):
            s = f"{f['name']} {f.get('version') or ''}".strip()
            if f.get("flavour") and f"+{f['flavour']}" not in s:
                s += f" ({f['flavour']})"
            out.append(s)
    return ", ".join(out) or None


def _recipe_label(entry: Any) -> Optional[str]:
    if isinstance(entry, str):
        return entry
    if not isinstance(entry, dict):
        return None
    for key in ("chosen", "top", "recommended", "best", "recipe"):
        inner = entry.get(key)
        if isinstance(inner, (dict, str)) and inner is not entry:
            label = _recipe_label(inner)
            if label:
                return label
    name = entry.get("title") or entry.get("id") or entry.get("recipe_id") or entry.get("name")
    if not name:
        return None
    extra = entry.get("variant") or entry.get("label")
    return f"{name}" + (f" ({extra})" if isinstance(extra, str) and extra else "")


def _pick_label(entry: Dict[str, Any], rid: str) -> str:
    label = f"{entry.get('title') or rid} [{rid}]"
    extra = [str(entry[k]) for k in ("version",) if entry.get(k)]
    if entry.get("index"):
        extra.append(f"index {entry['index']}")
    return label + (f", {', '.join(extra)}" if extra else "")


def plan_picks(plan: Any) -> List[Tuple[str, str]]:
    """(framework, top recommendation) pairs from a plan (mlprobe.plan.make_plan: `top` maps each
    framework to a recipe id described in `recommended`); other shapes are read leniently."""
    if not isinstance(plan, dict) or plan.get("available") is False:
        return []
    picks: List[Tuple[str, str]] = []
    recommended = [e for e in plan.get("recommended") or [] if isinstance(e, dict)]
    by_id = {str(e.get("recipe") or e.get("id")): e for e in recommended}
    top = plan.get("top")
    if isinstance(top, dict):
        for fw, rid in top.items():
            if rid is None:
                picks.append((str(fw), "nothing fits (see the plan's rejected recipes)"))
            elif isinstance(rid, str):
                picks.append((str(fw), _pick_label(by_id.get(rid, {}), rid)))
            else:
                label = _recipe_label(rid)
                if label:
                    picks.append((str(fw), label))
        if picks:
            return picks
    for key in ("by_framework", "frameworks", "per_framework", "plans", "top_picks"):
        v = plan.get(key)
        if isinstance(v, dict):
            for fw, entry in v.items():
                label = _recipe_label(entry)
                if label:
                    picks.append((str(fw), label))
        if picks:
            return picks
    seen = set()
    for entry in recommended:  # ranked best first: the first per framework is its top pick
        fw = str(entry.get("framework") or "any")
        label = _recipe_label(entry)
        if label and fw not in seen:
            seen.add(fw)
            picks.append((fw, label))
    return picks


def installed_lines(plan: Any) -> List[str]:
    if not isinstance(plan, dict):
        return []
    out = []
    for f in plan.get("installed") or []:
        if isinstance(f, dict) and f.get("package"):
            out.append(
                f"{f['package']} {f.get('version') or ''}: {BOLD}{f.get('status') or '?'}{BOLD}"
                + (f" — {f['message']}" if f.get("message") else "")
            )
    return out


def verify_lines(verify: Any) -> List[str]:
    if not isinstance(verify, dict):
        return []
    if verify.get("available") is False:
        return [str(verify.get("note") or "not run")]
    out = []
    for r in verify.get("results") or []:
        if not isinstance(r, dict):
            continue
        s = f"{r.get('framework') or '?'} on {r.get('device') or '?'}: {BOLD}{r.get('verdict') or '?'}{BOLD}"
        if isinstance(r.get("speedup_vs_best_cpu"), (int, float)):
            s += f" ({r['speedup_vs_best_cpu']:.2f}× the best CPU figure)"
        out.append(s)
    return out


def doctor_lines(doctor: Any) -> List[str]:
    """`mlprobe doctor`'s verdict and findings as Markdown lines (blocking and warnings in full, the rest
    named)."""
    if not isinstance(doctor, dict):
        return []
    if doctor.get("available") is False:
        return [md_text(str(doctor.get("note") or "doctor did not run"))]
    lines = [f"**{md_text(str(doctor.get('summary') or ''))}**", ""]
    infos = []
    for f in doctor.get("findings") or []:
        if not isinstance(f, dict):
            continue
        if f.get("severity") == "info":
            infos.append(md_text(str(f.get("title"))))
            continue
        lines.append(f"- **{md_text(str(f.get('severity', '')).upper())}** {md_text(str(f.get('title')))} "
                     f"({md_code(f.get('rule'))})")
        for e in (f.get("evidence") or [])[:3]:
            if isinstance(e, dict):
                lines.append(f"  - evidence, {md_code(e.get('capture'))}: {md_code(str(e.get('line'))[:300])}")
        fixes = [str(x) for x in f.get("fix") or []]
        if fixes:
            lines.append("  - fix: " + "; ".join(md_code(x) for x in fixes))
    if infos:
        lines.append("- also: " + "; ".join(infos))
    return lines


def summary_rows(doc: Dict[str, Any]) -> List[Tuple[str, str]]:
    scan = doc.get("scan") or {}
    raw_ov = scan.get("overrides")
    ov: Dict[str, Any] = raw_ov if isinstance(raw_ov, dict) else {}
    rows = [("OS", os_line(scan) + (" (Python overridden)" if "MLPROBE_OVERRIDE_PYTHON_VERSION" in ov else "")),
            ("CPU", cpu_line(scan) + (" (flags overridden)" if "MLPROBE_OVERRIDE_CPU_FLAGS" in ov else ""))]
    for key, value in ov.items():
        rows.append(("Overridden", f"{key}={value} (set for testing, not read from the machine)"))
    gpus = [g for g in scan.get("gpus") or [] if isinstance(g, dict)]
    if not gpus:
        rows.append(("GPU", "none found"))
    for i, g in enumerate(gpus):
        rows.append((f"GPU {i}" if len(gpus) > 1 else "GPU", gpu_line(g)))
    for u in scan.get("usb_accelerators") or []:
        if isinstance(u, dict):
            rows.append(
                ("USB accelerator", f"{u.get('name') or ''} [{u.get('vendor_id')}:{u.get('product_id')}]")
            )
    for label, value in (("Runtimes", runtimes_line(scan)), ("Frameworks", frameworks_line(scan))):
        if value:
            rows.append((label, value))
    picks = plan_picks(doc.get("plan"))
    for fw, label in picks:
        rows.append((f"Plan: {fw}", label))
    for line in installed_lines(doc.get("plan")):
        rows.append(("Installed", line))
    if not picks and isinstance(doc.get("plan"), dict) and doc["plan"].get("note"):
        rows.append(("Plan", str(doc["plan"]["note"])))
    if "verify" in doc:
        for line in verify_lines(doc.get("verify")) or ["no results"]:
            rows.append(("Verify", line))
    for w in scan.get("warnings") or []:
        rows.append(("Warning", str(w)))
    return _capped(rows)


def _redaction_line(doc: Dict[str, Any]) -> str:
    red = doc.get("redactions") or {}
    if not red.get("enabled"):
        return (
            "> [!WARNING]\n> **This report is NOT redacted** (`--no-redact`): it may hold host and user "
            "names, home paths, IP/MAC addresses, GPU UUIDs, serial numbers and secrets."
        )
    kinds = red.get("kinds") or {}
    if not kinds:
        return "Redacted: nothing identifying was found."
    what = ", ".join(f"{k} ×{v.get('occurrences', 0)}" for k, v in kinds.items())
    return f"Redacted ({what}); the same value has the same placeholder throughout."


# -- details ---------------------------------------------------------------------------------------


def fence(text: str, lang: str = "") -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") else text + "\n"
    return f"{ticks}{lang}\n{body}{ticks}"


def details(summary: str, body: str) -> str:
    return f"<details><summary>{summary}</summary>\n\n{body}\n\n</details>"


def _cut(text: str, limit: int) -> Tuple[str, int]:
    """The head of `text` in at most `limit` characters, cut at a line end. Returns (head, lines)."""
    if comment_size(text) <= limit:
        return text, text.count("\n")
    head = text[:limit]
    while comment_size(head) > limit:
        head = head[: max(0, len(head) - (comment_size(head) - limit) - 1)]
    if "\n" in head:
        head = head[: head.rfind("\n") + 1]
    return head, head.count("\n")


def _raw_files(doc: Dict[str, Any]) -> List[Tuple[str, str]]:
    bundle = doc.get("capture_bundle")
    if not isinstance(bundle, dict) or not isinstance(bundle.get("files"), dict):
        return []
    out = []
    for name, entry in sorted(bundle["files"].items()):
        if isinstance(entry, dict) and isinstance(entry.get("text"), str):
            # For reading (a Markdown report is never replayed): line ends as LF, control characters
            # and escape sequences shown as escapes.
            out.append((name, safe(entry["text"].replace("\r\n", "\n"))))
        elif isinstance(entry, dict) and isinstance(entry.get("base64"), str):
            out.append((name, f"[{len(entry['base64'])} characters of base64 data: see the JSON report]\n"))
    return out


def _water_fill(sizes: Sequence[int], budget: int) -> int:
    """The largest cap such that sum(min(size, cap)) <= budget."""
    if sum(sizes) <= budget:
        return max(sizes, default=0)
    lo, hi = 0, max(sizes, default=0)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(s, mid) for s in sizes) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


class _Layout:
    def __init__(self, doc: Dict[str, Any]) -> None:
        self.doc = doc
        self.trimmed: List[str] = []

    def head(self) -> str:
        d = self.doc
        lines = [
            "### mlprobe report",
            "",
            f"mlprobe {md_text(d.get('mlprobe_version', '?'))} · "
            f"report v{md_text(d.get('report_version', '?'))} · {md_text(d.get('generated_at', '?'))}",
            "",
            _redaction_line(d),
            "",
            "| | |",
            "| --- | --- |",
        ]
        lines += [f"| **{_cell(k)}** | {_cell(v)} |" for k, v in summary_rows(d)]
        shown = {str((d.get(k) or {}).get("note")) for k in ("plan", "verify", "doctor") if isinstance(d.get(k), dict)}
        notes = [
            n
            for n in d.get("notes") or []
            if isinstance(n, str) and n not in shown and not n.startswith("replay this machine")
        ]
        if notes:
            lines += [""] + [f"- {md_text(n)}" for n in notes]
        doctor = doctor_lines(d.get("doctor"))
        if doctor:
            lines += ["", "#### Doctor", ""] + doctor
        return "\n".join(lines)

    def json_sections(self, compact: bool, drop: Sequence[str]) -> List[str]:
        out = []
        for key, title in (("scan", "Scan (JSON)"), ("plan", "Plan (JSON)"), ("verify", "Verify (JSON)"),
                           ("doctor", "Doctor (JSON)")):
            if key not in self.doc or key in drop:
                continue
            data = self.doc[key]
            text = (
                json.dumps(data, ensure_ascii=False, separators=(",", ":"))
                if compact
                else json.dumps(data, indent=2, ensure_ascii=False)
            )
            # JSON escapes C0 controls itself; C1 and bidirectional marks become \uXXXX (same JSON)
            out.append(details(title, fence(json_safe(text), "json")))
        return out

    def raw_section(self, files: List[Tuple[str, str]], cap: Optional[int]) -> Tuple[str, List[str]]:
        trims: List[str] = []
        parts = []
        left_out = []
        for name, text in files:
            shown = text
            if cap is not None and comment_size(text) > cap:
                if cap < MIN_RAW_SHOWN:
                    left_out.append(f"`{name}` ({comment_size(text):,} characters)")
                    continue
                shown, lines = _cut(text, cap)
                total_lines = text.count("\n") + (0 if text.endswith("\n") else 1)
                trims.append(f"`{name}` cut to its first {lines:,} of {total_lines:,} lines")
                shown += f"[… trimmed by mlprobe: {total_lines - lines:,} more lines in the JSON report]\n"
            parts.append(details(f"<code>{_html_safe(name)}</code>", fence(shown, "text")))
        if left_out:
            trims.append("left out " + ", ".join(left_out))
        redacted = (self.doc.get("capture_bundle") or {}).get("redacted", True)
        title = f"Raw captures ({len(files)} files{', redacted' if redacted else ', NOT redacted'})"
        if not parts:
            return details(title, "All captures were left out to fit the comment limit."), trims
        return details(title, "\n\n".join(parts)), trims


def _assemble(head: str, trim_note: Optional[str], sections: Sequence[str]) -> str:
    blocks = [head]
    if trim_note:
        blocks.append(trim_note)
    blocks.extend(s for s in sections if s)
    return "\n\n".join(blocks) + "\n"


def _trim_note(trims: Sequence[str]) -> Optional[str]:
    if not trims:
        return None
    return (
        "> [!NOTE]\n> Trimmed to stay under GitHub's 65,536-character comment limit: "
        + "; ".join(trims)
        + ". The JSON report (`mlprobe report --include-raw -o report.json`) "
        "holds everything; attach it to the issue."
    )


def render_markdown(doc: Dict[str, Any], limit: int = GITHUB_COMMENT_LIMIT) -> str:
    budget = limit - SAFETY_MARGIN
    lay = _Layout(doc)
    head = lay.head()
    files = _raw_files(doc)
    # Escalating ways to fit: (compact JSON?, JSON sections to drop).
    plans: List[Tuple[bool, Tuple[str, ...]]] = [
        (False, ()),
        (True, ()),
        (True, ("doctor",)),
        (True, ("doctor", "plan", "verify")),
        (True, ("doctor", "plan", "verify", "scan")),
    ]
    text = ""
    for compact, drop in plans:
        json_parts = lay.json_sections(compact, drop)
        extra: List[str] = []
        if compact:
            extra.append("JSON details compacted")
        if drop:
            extra.append("left out the " + ", ".join(drop) + " JSON")
        cap: Optional[int] = None
        for _ in range(8):
            raw, trims = lay.raw_section(files, cap) if files else ("", [])
            note = _trim_note(trims + extra)
            text = _assemble(head, note, json_parts + [raw])
            over = comment_size(text) - budget
            if over <= 0:
                return text
            if not files:
                break
            sizes = [comment_size(t) for _n, t in files]
            current = sum(min(s, cap) if cap is not None else s for s in sizes)
            # Fixed overhead of per-file markup and the trim note grows as files are cut: aim lower.
            cap = _water_fill(sizes, max(0, current - over - 200 - 120 * len(files)))
            if cap < MIN_RAW_SHOWN:
                cap = 0
        if comment_size(text) <= budget:
            return text
    # Last resort: the summary alone (it is small by construction).
    note = _trim_note(["left out all details; only the summary is shown"])
    text = _assemble(head, note, [])
    if comment_size(text) > budget:
        text, _ = _cut(text, budget)
    return text
