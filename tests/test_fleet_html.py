"""`mlprobe fleet show FILE --html OUT`: one self-contained page, checked in a real headless browser
(Debian's chromium and chromium-driver, through selenium): the groups, the drift rows highlighted, the
nodes without a report, the verify-speed chart, and no console errors (the page's own
Content-Security-Policy turns any attempt to load something into one)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from mlprobe.cli import main
from mlprobe.fleet.document import build_fleet
from mlprobe.fleet.merge import merge_fleet
from mlprobe.fleet.model import FleetNode, FleetSource

from .fleet_gen import OLD_DRIVER, template_reports, write_fleet


@pytest.fixture(scope="module")
def fleet_doc(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    folder = tmp_path_factory.mktemp("html-fleet")
    write_fleet(folder, 48, driver_every=3, torch_every=4)
    merged = merge_fleet([str(folder)])
    # a node that did not answer, as `fleet scan` reports it
    nodes = merged.nodes + (FleetNode(name="10.0.0.99", status="lost", error="the node died during the scan <b>",
                                      ray_node_id="ab" * 28),)
    return build_fleet(nodes, FleetSource(kind="ray", address="10.0.0.1:6379", timeout_s=60)).to_json()


@pytest.fixture(scope="module")
def page(fleet_doc: Dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("html")
    src = d / "fleet.json"
    src.write_text(json.dumps(fleet_doc))
    out = d / "fleet.html"
    assert main(["fleet", "show", str(src), "--html", str(out)]) == 0
    return out


def test_page_is_self_contained(page: Path) -> None:
    html = page.read_text(encoding="utf-8")
    assert "<script" not in html.lower()
    # the only URL is the SVG namespace, which names and loads nothing
    assert re.findall(r"https?://[^\"' )]+", html) == ["http://www.w3.org/2000/svg"]
    assert not re.search(r"\b(src|href)\s*=", html) and "url(" not in html and "@import" not in html
    assert "default-src 'none'" in html
    assert "the node died during the scan &lt;b&gt;" in html  # text from a node is escaped


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")
    if not CHROMIUM or not CHROMEDRIVER:
        pytest.skip("chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        yield drv
    finally:
        drv.quit()


def _errors(drv: Any) -> List[Dict[str, Any]]:
    return [e for e in drv.get_log("browser") if e.get("level") in ("SEVERE", "WARNING")]


@pytest.mark.slow
def test_page_in_a_real_browser(browser: Any, page: Path, fleet_doc: Dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By

    browser.get(page.as_uri())
    assert browser.title.startswith("mlprobe fleet")
    assert _errors(browser) == []
    summary = browser.find_element(By.ID, "summary").text
    assert "49 node(s)" in summary and "lost 1" in summary
    rows = browser.find_elements(By.CSS_SELECTOR, "#groups tbody tr")
    assert len(rows) == len(fleet_doc["groups"]) == 8
    assert any("NVIDIA H200" in r.text and "torch-cuda" in r.text for r in rows)
    # AMD's own wheels carry gfx1031 kernels: the RX 6700 XT group plans them, with no override
    assert any("gfx1031" in r.text and "torch-rocm-amd" in r.text for r in rows)
    assert not any("gfx1031" in r.text and "HSA_OVERRIDE_GFX_VERSION" in r.text for r in rows)
    # drift: one row per drift, highlighted
    drift = browser.find_elements(By.CSS_SELECTOR, "#drift tbody tr")
    assert len(drift) == len(fleet_doc["drift"]) > 0
    assert any(OLD_DRIVER in r.text for r in drift)
    plain = browser.find_element(By.CSS_SELECTOR, "#groups th").value_of_css_property("background-color")
    for r in drift:
        bg = r.find_element(By.TAG_NAME, "td").value_of_css_property("background-color")
        assert bg == "rgba(255, 241, 194, 1)", bg
    assert plain != "rgba(255, 241, 194, 1)"
    # the node without a report
    lost = [r for r in browser.find_elements(By.CSS_SELECTOR, "#nodes tbody tr") if "10.0.0.99" in r.text][0]
    assert "lost" in lost.text and "<b>" in lost.text  # shown as text, not markup
    # the chart: a bar per device, the H200's CUDA device first and fastest
    bars = browser.find_elements(By.CSS_SELECTOR, "#speed-chart g.bar")
    assert len(bars) == 2
    assert "torch cuda:0" in bars[0].text and "53,538" in bars[0].text
    assert "torch cpu" in bars[1].text and "2,689" in bars[1].text
    w = [float(b.find_element(By.TAG_NAME, "rect").get_attribute("width")) for b in bars]
    assert w[0] > 15 * w[1]
    assert _errors(browser) == []


@pytest.mark.slow
def test_the_console_check_catches_a_page_that_loads_something(browser: Any, tmp_path: Path) -> None:
    """The same policy, on a page that tries to fetch an image: the browser logs an error, so the
    check above is a real one."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><head><meta http-equiv=\"Content-Security-Policy\" "
                   "content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\"></head>"
                   "<body><img src=\"https://example.invalid/x.png\"></body></html>")
    browser.get(bad.as_uri())
    assert _errors(browser) != []


def test_empty_fleet_page(tmp_path: Path) -> None:
    from mlprobe.fleet.html import fleet_page

    html = fleet_page(build_fleet([], FleetSource(kind="merge", files=0)))
    assert "No node differs" in html and "No report carries verify speeds" in html


def test_templates_reach_the_chart() -> None:
    from mlprobe.fleet.html import speed_rows
    from mlprobe.fleet.summary import summarize

    nodes = [FleetNode(name=f"n{i}", status="ok", facts=summarize(d)) for i, d in enumerate(template_reports())]
    rows = speed_rows(build_fleet(nodes, FleetSource(kind="merge", files=len(nodes))))
    assert [r[0].split(":")[0] for r in rows] == ["torch cuda", "torch cpu"]


BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


def test_bidi_controls_are_shown_escaped_not_obeyed() -> None:
    """U+202E in a node name reverses what follows on the page (`(1/2)` reads `(2/1)`): every
    bidirectional control is written as a visible escape, and so are other control characters."""
    from mlprobe.fleet.html import fleet_page
    from mlprobe.fleet.summary import summarize

    docs = template_reports()
    docs[0]["scan"]["gpus"][0]["name"] = "H200 \u202e(1/2)\u202c x\u2066y\u2069 \u200f"
    docs[0]["scan"]["cpu"]["model"] = "CPU\x1b[31m\x07\u2028"
    nodes = [FleetNode(name=f"n\u202e{i}", status="ok", facts=summarize(d)) for i, d in enumerate(docs)]
    nodes.append(FleetNode(name="bad\u202e", status="error", error="no \u202ereport\u2067"))
    html = fleet_page(build_fleet(nodes, FleetSource(kind="merge", files=len(nodes)), warnings=["w\u202e"]))
    assert not any(c in html for c in BIDI), [hex(ord(c)) for c in BIDI if c in html]
    assert "\x1b" not in html and "\x07" not in html and "\u2028" not in html
    assert "\\u202e(1/2)" in html and "n\\u202e0" in html
