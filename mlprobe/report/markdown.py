"""The report as a GitHub comment: a short summary table, then the details in collapsible
<details> sections. It stays under GitHub's 65,536-character comment limit: raw captures are
trimmed first (large ones cut, the smallest kept whole), then the JSON details are compacted or
left out, and the comment says what it trimmed."""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Protocol, Sequence, Tuple

from ..model.facts import Facts, GpuFacts
from ..model.plan import Plan, Recommendation
from ..model.report import CaptureBundle, DoctorSection, Redactions, ReportEnvelope, VerifySection
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


def _gib(n: Optional[int]) -> Optional[str]:
    if not isinstance(n, (int, float)) or n <= 0:
        return None
    return f"{n / 1024**3:.1f} GiB" if n >= 1024**3 else f"{n / 1024**2:.0f} MiB"


def os_line(scan: Facts) -> str:
    o = scan.os
    parts: List[object] = [o.distro or o.system or "unknown OS"]
    if o.system == "Linux" and o.release:
        parts.append(f"kernel {o.release}")
    if o.wsl:
        parts.append("WSL")
    if o.glibc:
        parts.append(f"glibc {o.glibc}")
    if o.windows_build:
        parts.append(f"build {o.windows_build}")
    if scan.python.version:
        parts.append(f"Python {scan.python.version}")
    return ", ".join(str(p) for p in parts)


def cpu_line(scan: Facts) -> str:
    c = scan.cpu
    head = c.model or c.vendor or "unknown CPU"
    bits = [b for b in (c.arch,) if b]
    if c.cores or c.threads:
        from ..ui import count

        bits.append(f"{count(c.cores, 'core')} / {count(c.threads, 'thread')}")
    if c.x86_64_level:
        bits.append(f"{BOLD}x86-64-v{c.x86_64_level}{BOLD}")
    flags = set(c.flags)
    shown: List[str] = [
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
    if c.arch == "x86_64" and flags and "avx" not in flags:
        shown.insert(0, f"{BOLD}no AVX{BOLD}")
    line = f"{head}" + (f" ({', '.join(str(b) for b in bits)})" if bits else "")
    return line + (f"; {' '.join(shown)}" if shown else "")


def gpu_line(g: GpuFacts) -> str:
    bits = []
    if g.driver_version:
        bits.append(f"driver {g.driver_version}")
    if g.compute_capability:
        bits.append(f"CC {g.compute_capability}")
    gfx = g.gfx_target
    if gfx:
        rt = g.runtime_gfx_target
        bits.append(gfx + (f" (runs as {rt})" if rt and rt != gfx else ""))
    if g.architecture:
        bits.append(str(g.architecture))
    mem = _gib(g.memory_bytes)
    if mem:
        bits.append(mem)
    elif g.integrated:
        bits.append("integrated")
    if g.mig_mode and g.mig_mode.lower() == "enabled":
        bits.append(f"MIG on ({g.mig_devices or 0} slices)")
    if g.apis:
        bits.append("/".join(g.apis))
    return f"{g.name or g.vendor or 'GPU'}" + (f" — {', '.join(bits)}" if bits else "")


def runtimes_line(scan: Facts) -> Optional[str]:
    rt = scan.runtimes
    out = []
    if rt.cuda is not None:
        drv = rt.cuda.driver_version
        out.append(f"CUDA {rt.cuda.version or ''}".strip() + (f" (driver {drv})" if drv else ""))
    if rt.rocm is not None:
        out.append(f"ROCm {rt.rocm.version or ''}".strip())
    if rt.metal is not None:  # Metal and DirectML have no version of their own
        out.append("Metal")
    if rt.directml is not None:
        out.append("DirectML")
    if rt.opencl is not None:
        names = [str(p.name) for p in rt.opencl.platforms]
        out.append("OpenCL: " + (", ".join(names) if names else "no platform"))
    return "; ".join(out) or None


def frameworks_line(scan: Facts) -> Optional[str]:
    out = []
    for f in scan.frameworks:
        if f.name:
            s = f"{f.name} {f.version or ''}".strip()
            if f.flavour and f"+{f.flavour}" not in s:
                s += f" ({f.flavour})"
            out.append(s)
    return ", ".join(out) or None


def _pick_label(rec: Optional[Recommendation], rid: str) -> str:
    label = f"{(rec.title if rec is not None else None) or rid} [{rid}]"
    if rec is None:
        return label
    extra = [rec.version] if rec.version else []
    if rec.index:
        extra.append(f"index {rec.index}")
    return label + (f", {', '.join(extra)}" if extra else "")


def plan_picks(plan: Optional[Plan]) -> List[Tuple[str, str]]:
    """(framework, top recommendation) pairs of a plan: `top` maps each framework to a recipe id
    described in `recommended` (None: nothing fits); a plan without `top` gives the first
    recommendation of each framework (ranked best first)."""
    if plan is None:
        return []
    by_id = {r.recipe: r for r in plan.recommended}
    picks: List[Tuple[str, str]] = []
    for fw, rid in plan.top.items():
        if rid is None:
            picks.append((fw, "nothing fits (see the plan's rejected recipes)"))
        else:
            picks.append((fw, _pick_label(by_id.get(rid), rid)))
    if picks:
        return picks
    seen = set()
    for rec in plan.recommended:
        fw = rec.framework or "any"
        if rec.recipe and fw not in seen:
            seen.add(fw)
            picks.append((fw, rec.recipe))
    return picks


def installed_lines(plan: Optional[Plan]) -> List[str]:
    if plan is None:
        return []
    return [f"{f.package} {f.version or ''}: {BOLD}{f.status or '?'}{BOLD}" + (f" — {f.message}" if f.message else "")
            for f in plan.installed if f.package]


def verify_lines(verify: VerifySection) -> List[str]:
    if verify.result is None:
        return [(verify.missing.note if verify.missing is not None else None) or "not run"]
    out = []
    for r in verify.result.results:
        s = f"{r.framework or '?'} on {r.device or '?'}: {BOLD}{r.verdict or '?'}{BOLD}"
        if r.speedup_vs_best_cpu is not None:
            s += f" ({r.speedup_vs_best_cpu:.2f}× the best CPU figure)"
        out.append(s)
    if not out:
        # nothing ran: say why (verify's own summary names it), never a bare "no results"
        why = [str(x) for x in verify.result.summary if str(x).strip()]
        out.append("nothing was measured" + (f": {why[0]}" if why else
                                             ": no framework with a usable device in that Python"))
    return out


def doctor_lines(doctor: Optional[DoctorSection]) -> List[str]:
    """`mlprobe doctor`'s verdict and findings as Markdown lines (blocking and warnings in full, the rest
    named)."""
    if doctor is None:
        return []
    if doctor.result is None:
        return [md_text((doctor.missing.note if doctor.missing is not None else None) or "doctor did not run")]
    lines = [f"**{md_text(doctor.result.summary or '')}**", ""]
    infos = []
    for f in doctor.result.findings:
        if f.severity == "info":
            infos.append(md_text(f.title))
            continue
        lines.append(f"- **{md_text(f.severity.upper())}** {md_text(f.title)} ({md_code(f.rule)})")
        for e in f.evidence[:3]:
            lines.append(f"  - evidence, {md_code(e.capture)}: {md_code(e.line[:300])}")
        if f.fix:
            lines.append("  - fix: " + "; ".join(md_code(x) for x in f.fix))
    if infos:
        lines.append("- also: " + "; ".join(infos))
    return lines


def summary_rows(report: ReportEnvelope) -> List[Tuple[str, str]]:
    scan = report.scan
    ov = scan.overrides
    rows = [("OS", os_line(scan) + (" (Python overridden)" if "MLPROBE_OVERRIDE_PYTHON_VERSION" in ov else "")),
            ("CPU", cpu_line(scan) + (" (flags overridden)" if "MLPROBE_OVERRIDE_CPU_FLAGS" in ov else ""))]
    for key, value in ov.items():
        rows.append(("Overridden", f"{key}={value} (set for testing, not read from the machine)"))
    if not scan.gpus:
        rows.append(("GPU", "none found"))
    for i, g in enumerate(scan.gpus):
        rows.append((f"GPU {i}" if len(scan.gpus) > 1 else "GPU", gpu_line(g)))
    for u in scan.usb_accelerators:
        rows.append(("USB accelerator", f"{u.name or ''} [{u.vendor_id}:{u.product_id}]"))
    # the scan's frameworks are those of the Python mlprobe scanned; verify's (--python) may be
    # another interpreter's: each row says whose it is, never one row for both
    verified = report.verify.result if report.verify is not None else None
    scanned_py = scan.python.executable
    fw_label = f"Frameworks ({scanned_py})" if scanned_py else "Frameworks"
    for label, line in (("Runtimes", runtimes_line(scan)), (fw_label, frameworks_line(scan))):
        if line:
            rows.append((label, line))
    if verified is not None and verified.python.executable and verified.python.executable != scanned_py:
        shown = [f"{f.name} {f.version or ''}".strip() for f in verified.frameworks if f.status != "not installed"]
        rows.append((f"Frameworks ({verified.python.executable}, verified)", ", ".join(shown) or "none installed"))
    picks = plan_picks(report.plan.plan)
    for fw, pick in picks:
        rows.append((f"Plan: {fw}", pick))
    for line in installed_lines(report.plan.plan):
        rows.append(("Installed", line))
    missing = report.plan.missing
    if not picks and missing is not None and missing.note:
        rows.append(("Plan", missing.note))
    if report.verify is not None:
        for line in verify_lines(report.verify):
            rows.append(("Verify", line))
    for w in scan.warnings:
        rows.append(("Warning", str(w)))
    return _capped(rows)


def _redaction_line(red: Redactions) -> str:
    if not red.enabled:
        return (
            "> [!WARNING]\n> **This report is NOT redacted** (`--no-redact`): it may hold host and user "
            "names, home paths, IP/MAC addresses, GPU UUIDs, serial numbers and secrets."
        )
    kinds = red.kinds or {}
    if not kinds:
        return "Redacted: nothing identifying was found."
    what = ", ".join(f"{k} ×{v.occurrences}" for k, v in kinds.items())
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


def _raw_files(bundle: Optional[CaptureBundle]) -> List[Tuple[str, str]]:
    if bundle is None:
        return []
    out = []
    for name, entry in sorted(bundle.files.items()):
        if entry.text is not None:
            # For reading (a Markdown report is never replayed): line ends as LF, control characters
            # and escape sequences shown as escapes.
            out.append((name, safe(entry.text.replace("\r\n", "\n"))))
        elif entry.base64 is not None:
            out.append((name, f"[{len(entry.base64)} characters of base64 data: see the JSON report]\n"))
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


class _Section(Protocol):
    def to_json(self) -> object: ...


class _Layout:
    def __init__(self, report: ReportEnvelope) -> None:
        self.report = report
        self.trimmed: List[str] = []

    def head(self) -> str:
        r = self.report
        lines = [
            "### mlprobe report",
            "",
            f"mlprobe {md_text(r.mlprobe_version)} · {md_text(r.schema)} · {md_text(r.generated_at)}",
            "",
            _redaction_line(r.redactions),
            "",
            "| | |",
            "| --- | --- |",
        ]
        lines += [f"| **{_cell(k)}** | {_cell(v)} |" for k, v in summary_rows(r)]
        shown = {s.missing.note for s in (r.plan, r.verify, r.doctor) if s is not None and s.missing is not None}
        notes = [n for n in r.notes if n not in shown and not n.startswith("replay this machine")]
        if notes:
            lines += [""] + [f"- {md_text(n)}" for n in notes]
        doctor = doctor_lines(r.doctor)
        if doctor:
            lines += ["", "#### Doctor", ""] + doctor
        return "\n".join(lines)

    def json_sections(self, compact: bool, drop: Sequence[str]) -> List[str]:
        out = []
        r = self.report
        sections: Tuple[Tuple[str, str, Optional[_Section]], ...] = (
            ("scan", "Scan (JSON)", r.scan), ("plan", "Plan (JSON)", r.plan), ("verify", "Verify (JSON)", r.verify),
            ("doctor", "Doctor (JSON)", r.doctor))
        for key, title, section in sections:
            if section is None or key in drop:
                continue
            data = section.to_json()  # the section as the JSON report holds it
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
        bundle = self.report.capture_bundle
        redacted = bundle.redacted if bundle is not None else True
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


def render_markdown(report: ReportEnvelope, limit: int = GITHUB_COMMENT_LIMIT) -> str:
    budget = limit - SAFETY_MARGIN
    lay = _Layout(report)
    head = lay.head()
    files = _raw_files(report.capture_bundle)
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
