"""The Markdown report for GitHub: it parses, the summary comes first, details are collapsible, and
it stays under GitHub's comment limit, trimming raw captures first and saying so."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any, Dict, List

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from mlprobe.scan.host import ReplayHost
from tests.report_doc import build_report, markdown
from mlprobe.report.envelope import ReportOptions
from mlprobe.model.plan import Plan, PlanTarget, Recommendation
from mlprobe.report.markdown import GITHUB_COMMENT_LIMIT, comment_size, plan_picks

from .conftest import FIXTURES
from .fuzz import examples

MD = MarkdownIt("commonmark").enable("table")


def parse(text: str) -> List[Token]:
    return MD.parse(text)


def table_rows(tokens: List[Token]) -> Dict[str, str]:
    """First table: {header cell: value cell} for each body row (inline content)."""
    rows: Dict[str, str] = {}
    start = next(i for i, t in enumerate(tokens) if t.type == "table_open")
    cells: List[str] = []
    in_body = False
    for t in tokens[start:]:
        if t.type == "table_close":
            break
        if t.type == "tbody_open":
            in_body = True
        if in_body and t.type == "inline":
            cells.append(t.content)
        if in_body and t.type == "tr_close":
            key = cells[0].strip("*")
            rows[key] = rows[key] + " / " + cells[1] if key in rows else cells[1]
            cells = []
    return rows


def details_balanced(text: str) -> bool:
    return text.count("<details>") == text.count("</details>") >= 1


@pytest.fixture(scope="module")
def nvidia_doc() -> Dict[str, Any]:
    return build_report(
        ReplayHost(FIXTURES / "synthetic-linux-nvidia-secrets"), ReportOptions(include_raw=True)
    )


def test_markdown_parses_with_summary_table_first(nvidia_doc: Dict[str, Any]) -> None:
    md = markdown(nvidia_doc)
    tokens = parse(md)
    kinds = [t.type for t in tokens]
    assert kinds.index("table_open") < kinds.index("html_block") < kinds.index("fence")
    rows = table_rows(tokens)
    assert "Debian GNU/Linux 12" in rows["OS"]
    assert "x86-64-v4" in rows["CPU"]
    gpu = rows["GPU"]
    assert "NVIDIA GeForce RTX 2080 SUPER" in gpu and "driver 610.57.04" in gpu and "CC 7.5" in gpu
    assert "CUDA 13.3" in rows["Runtimes"]
    assert "torch-cuda" in rows["Plan: torch"] and "tensorflow-cuda" in rows["Plan: tensorflow"]
    assert details_balanced(md)


def test_details_hold_the_json_and_the_raw_captures() -> None:
    doc = build_report(
        ReplayHost(FIXTURES / "synthetic-linux-wsl2-amd-secrets"), ReportOptions(include_raw=True)
    )
    md = markdown(doc)
    assert comment_size(md) <= GITHUB_COMMENT_LIMIT and "Trimmed" not in md
    fences = [t for t in parse(md) if t.type == "fence"]
    json_fences = [t for t in fences if t.info == "json"]
    assert json.loads(json_fences[0].content) == doc["scan"]
    assert json.loads(json_fences[1].content) == doc["plan"]
    raw = {t.content for t in fences if t.info == "text"}
    for name, entry in doc["capture_bundle"]["files"].items():
        body = entry["text"] if entry["text"].endswith("\n") else entry["text"] + "\n"
        assert body in raw, name


def test_a_bundle_over_the_limit_is_trimmed(nvidia_doc: Dict[str, Any]) -> None:
    size = sum(len(e["text"]) for e in nvidia_doc["capture_bundle"]["files"].values())
    assert size > GITHUB_COMMENT_LIMIT
    md = markdown(nvidia_doc)
    assert comment_size(md) <= GITHUB_COMMENT_LIMIT and "Trimmed" in md and details_balanced(md)


def test_amd_summary_shows_gfx_targets() -> None:
    doc = build_report(ReplayHost(FIXTURES / "linux-amd-rx6700xt-gfx1031-hsa-override-rocminfo"))
    rows = table_rows(parse(markdown(doc)))
    gpu = next(v for k, v in rows.items() if k.startswith("GPU"))
    assert "gfx1031 (runs as gfx1030)" in gpu
    assert any("HSA_OVERRIDE_GFX_VERSION" in v for k, v in rows.items() if k == "Warning")


def test_placeholders_show_in_table_cells() -> None:
    doc = {
        "report_version": 1,
        "kind": "mlprobe-report",
        "mlprobe_version": "0",
        "generated_at": "now",
        "redactions": {"enabled": True, "note": ""},
        "scan": {"os": {"distro": "X"}, "cpu": {}, "gpus": [{"vendor": "amd", "name": "<host-1> GPU | x"}]},
        "plan": {"available": False, "note": "no plan"},
    }
    tokens = parse(markdown(doc))
    rows = table_rows(tokens)
    assert "GPU" in rows
    html = MD.render(markdown(doc))
    assert "&lt;host-1&gt; GPU | x" in html


def _huge_cpuinfo(target: int) -> str:
    block = (FIXTURES / "linux-nogpu-xeon-gold-6230-avx512" / "proc-cpuinfo.txt").read_text(encoding="utf-8")
    blocks = [b for b in block.split("\n\n") if b.strip()]
    out: List[str] = []
    n = 0
    size = 0
    while size < target:
        for b in blocks:
            text = re.sub(r"^processor\t: \d+", f"processor\t: {n}", b, flags=re.M) + "\n\n"
            out.append(text)
            size += len(text)
            n += 1
    return "".join(out)


@pytest.mark.slow
def test_a_two_megabyte_capture_still_fits_one_comment(tmp_path: Path) -> None:
    """Acceptance: a 2 MB capture still yields a comment under the limit, raw parts trimmed first."""
    bundle = tmp_path / "bundle"
    shutil.copytree(FIXTURES / "synthetic-linux-nvidia-secrets", bundle)
    (bundle / "proc-cpuinfo.txt").write_text(_huge_cpuinfo(2 * 1024 * 1024), encoding="utf-8")
    assert (bundle / "proc-cpuinfo.txt").stat().st_size >= 2 * 1024 * 1024
    doc = build_report(ReplayHost(bundle), ReportOptions(include_raw=True))
    md = markdown(doc)
    assert comment_size(md) < GITHUB_COMMENT_LIMIT
    tokens = parse(md)
    assert "NVIDIA GeForce RTX 2080 SUPER" in table_rows(tokens)["GPU"]
    assert details_balanced(md)
    note = re.search(r"Trimmed to stay under GitHub's 65,536-character comment limit: (.*)", md)
    assert note and "`proc-cpuinfo.txt` cut to its first" in note.group(1)
    # the raw parts went first: the JSON details are whole and still pretty-printed
    json_fences = [t for t in tokens if t.type == "fence" and t.info == "json"]
    assert json.loads(json_fences[0].content) == doc["scan"] and "\n  " in json_fences[0].content
    # small captures are kept whole; the big one is a prefix of itself
    raw = {t.content for t in tokens if t.type == "fence" and t.info == "text"}
    files = doc["capture_bundle"]["files"]
    assert files["uname.txt"]["text"] in raw
    cut = next(c for c in raw if c.startswith(files["proc-cpuinfo.txt"]["text"][:200]))
    assert "[… trimmed by mlprobe:" in cut
    assert files["proc-cpuinfo.txt"]["text"].startswith(cut[: cut.index("[… trimmed by mlprobe:")])


@pytest.mark.slow
def test_several_huge_captures_and_a_huge_scan_still_fit(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(FIXTURES / "synthetic-windows-secrets", bundle)
    dx = (bundle / "dxdiag.txt").read_bytes()
    (bundle / "dxdiag.txt").write_bytes(dx * 4)
    (bundle / "pip-list.txt").write_text(
        "Package Version\n------- -------\n" + "".join(f"package-{i} 1.0.{i}\n" for i in range(20000)),
        encoding="utf-8",
    )
    doc = build_report(ReplayHost(bundle), ReportOptions(include_raw=True))
    doc["scan"]["warnings"] = [f"warning {i} " + "x" * 200 for i in range(400)]  # a very long scan section
    md = markdown(doc)
    assert comment_size(md) < GITHUB_COMMENT_LIMIT
    assert details_balanced(md) and "Trimmed" in md
    rows = table_rows(parse(md))
    assert "NVIDIA GeForce RTX 3090" in rows["GPU"]
    assert rows["Warning"].count("warning") == 8 and "more in the JSON report" in rows["Warning"]


def test_a_tiny_limit_keeps_the_summary() -> None:
    doc = build_report(
        ReplayHost(FIXTURES / "synthetic-linux-nvidia-secrets"), ReportOptions(include_raw=True)
    )
    md = markdown(doc, limit=4000)
    assert comment_size(md) <= 4000
    assert "| **GPU** |" in md and "Trimmed" in md


def _plan(top: Dict[str, Any], *recommended: Recommendation) -> Plan:
    return Plan(schema="mlprobe.plan/2", framework="any", target=PlanTarget(None, None, None, None, None), top=top,
                recommended=recommended, rejected=(), retired=(), installed=(), warnings=())


def test_plan_picks_reads_the_plan() -> None:
    plan = _plan({"torch": "torch-cuda", "tensorflow": None},
                 Recommendation(recipe="torch-cuda", title="PyTorch with CUDA", version="2.9", index="cu128"))
    assert plan_picks(plan) == [
        ("torch", "PyTorch with CUDA [torch-cuda], 2.9, index cu128"),
        ("tensorflow", "nothing fits (see the plan's rejected recipes)"),
    ]
    assert plan_picks(None) == []
    assert plan_picks(_plan({"jax": "jax-tpu"})) == [("jax", "jax-tpu [jax-tpu]")]  # not among `recommended`
    # without `top`: the first (best) recommendation of each framework
    assert plan_picks(_plan({}, Recommendation(recipe="t", title="T", framework="torch"),
                            Recommendation(recipe="u", title="U", framework="torch"))) == [("torch", "t")]


# -- hostile content -------------------------------------------------------------------------------

PIECES = list("ab`|<>/\\*_-#\n ") + [
    "```",
    "</details>",
    "<details>",
    "<summary>",
    "~~~",
    "\r\n",
    "é",
    "😀",
    "    indented",
    "| x | y |",
    "&lt;",
]
hostile = st.lists(st.sampled_from(PIECES), max_size=120).map("".join)


def _norm(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    raw=st.dictionaries(
        st.sampled_from(["dxdiag.txt", "lspci.txt", "uname.txt", "clinfo.txt"]),
        st.tuples(hostile, st.integers(0, 5000)),
        max_size=4,
    ),
    name=hostile,
    limit=st.integers(2500, 20000),
)
def test_hostile_content_renders_parses_and_fits(raw: Dict[str, Any], name: str, limit: int) -> None:
    files = {n: {"text": text * (1 + reps // max(1, len(text) or 1))} for n, (text, reps) in raw.items()}
    doc = {
        "report_version": 1,
        "kind": "mlprobe-report",
        "mlprobe_version": "0",
        "generated_at": "2026-01-01T00:00:00Z",
        "redactions": {"enabled": True, "note": "", "kinds": {}},
        "scan": {"os": {"distro": name}, "cpu": {"model": name}, "gpus": [{"vendor": "amd", "name": name}]},
        "plan": {"available": False, "note": name},
        "capture_bundle": {"redacted": True, "files": files},
        "notes": [name],
    }
    md = markdown(doc, limit=limit)
    assert comment_size(md) <= limit
    tokens = parse(md)
    # every raw capture shown is shown verbatim (whole, or as a prefix with the trim marker)
    shown = [
        t.content.split("[… trimmed by mlprobe:")[0] for t in tokens if t.type == "fence" and t.info == "text"
    ]
    assert len(shown) <= len(files)
    for body in shown:
        assert any(_norm(f["text"]).startswith(body[:-1]) for f in files.values()), body[:80]


HOSTILE_MD = {
    "image": "![x](https://evil.example/pixel.png?os=linux)",
    "link": "[click here](https://evil.example/phish)",
    "ref-image": "![y][r]\n\n[r]: https://evil.example/ref.png",
    "html": "<img src=https://evil.example/h.png>",
    "autolink": "<https://evil.example/auto>",
    "bare": "see https://evil.example/bare and www.evil.example",
    "mention": "@octocat and someone@evil.example",
    "emphasis": "**loud** _x_ ~~gone~~ `code`",
    "escape": "trailing backslash \\",
    "pipe": "a | b",
}


def _hostile_doc() -> Dict[str, Any]:
    doc = build_report(ReplayHost(FIXTURES / "linux-nvidia-h100-smi"), ReportOptions())
    scan = doc["scan"]
    scan["gpus"][0]["name"] = HOSTILE_MD["image"]
    scan["gpus"][0]["driver_version"] = HOSTILE_MD["link"]
    scan["cpu"]["model"] = HOSTILE_MD["ref-image"]
    scan["os"]["distro"] = HOSTILE_MD["html"] + " " + HOSTILE_MD["autolink"]
    scan["frameworks"].append({"name": HOSTILE_MD["bare"], "version": HOSTILE_MD["mention"]})
    scan["warnings"] = [HOSTILE_MD["emphasis"], HOSTILE_MD["escape"], HOSTILE_MD["pipe"]]
    doc["notes"] = [HOSTILE_MD["image"] + " " + HOSTILE_MD["link"]]
    return doc


def _links_and_images(tokens: List[Token]) -> List[str]:
    out = []
    for t in tokens:
        for c in [t, *(t.children or [])]:
            if c.type in ("image", "link_open") or (c.type in ("html_inline", "html_block") and "evil" in c.content):
                out.append(f"{c.type}: {c.attrs or c.content}")
            if c.type in ("strong_open", "em_open", "s_open", "code_inline") and "evil" not in (c.content or ""):
                pass
    return out


def test_markdown_in_values_is_text_not_markup() -> None:
    """A fact like `![x](https://…)` would be an image that loads (and reports the machine) when the
    ticket is viewed; a link would point anywhere. In the report they are text."""
    md = markdown(_hostile_doc())
    head = md.split("<details>", 1)[0]  # the summary and notes (the JSON details are in fences)
    gfm = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    tokens = gfm.parse(head)
    assert not _links_and_images(tokens), _links_and_images(tokens)
    html = gfm.render(head)
    assert "<img" not in html and "href=" not in html and "<strong>loud" not in html and "<s>" not in html
    assert "<code>code" not in html and "<em>x" not in html
    # GitHub's own autolinks (bare URLs, www., e-mail) and @-mentions are broken too
    assert "https://evil" not in head and "www.evil" not in head
    assert not re.search(r"(?<!\\)@", head), "an @-mention or e-mail autolink"
    # the text is all there, as text
    rows = table_rows(tokens)
    plain = {k: re.sub(r"\\(.)", r"\1", v) for k, v in rows.items()}
    assert "![x](https://evil.example/pixel.png?os=linux)" in plain["GPU"]
    assert "[click here](https://evil.example/phish)" in plain["GPU"]
    assert "**loud** _x_ ~~gone~~ `code`" in plain["Warning"]
    assert "a | b" in html
    # our own emphasis stays
    assert "<strong>x86-64-v" in html or "x86-64" not in head
