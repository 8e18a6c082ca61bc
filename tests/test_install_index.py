"""Index checks over real HTTP on 127.0.0.1 (PEP 691 JSON and PEP 503 HTML), the page parsers (with
mutation fuzzing), and the target interpreter's tags."""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Iterator, List

import pytest
import requests
from hypothesis import HealthCheck, given, settings, strategies as st

from mlprobe.errors import ParseError
from mlprobe.install.index import (
    IndexCheck,
    check_index,
    evaluate_files,
    parse_simple_html,
    parse_simple_json,
    running_target,
    target_for_interpreter,
    target_from_report,
)
from mlprobe.model.facts import Facts
from tests.pep503_server import IndexConfig, LocalIndex, build_wheel, free_port_url, sample_wheels
from tests.fuzz import examples

REAL_PAGE = Path("/opt/pypi/simple/numpy/index.html")  # a real PEP 503 page where this machine has one


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheels")
    sample_wheels(folder)
    build_wheel(folder, "newpy-only", "1.0", requires_python=">=3.99")
    build_wheel(folder, "newpy-only", "0.9")
    return folder


@pytest.fixture(scope="module")
def index(wheels: Path) -> Iterator[LocalIndex]:
    with LocalIndex(wheels, max_requests=500, lifetime_s=120) as idx:
        yield idx


@pytest.fixture(scope="module")
def html_index(wheels: Path) -> Iterator[LocalIndex]:
    with LocalIndex(wheels, IndexConfig(json_api=False, serve_metadata=False), max_requests=500,
                    lifetime_s=120) as idx:
        yield idx


# ---------------------------------------------------------------- over HTTP ------------------

def test_json_api_compatible_wheel_with_size(index: LocalIndex) -> None:
    c = check_index(index.url, "goodlib>=2", running_target())
    assert c.ok and c.reachable and c.api == "json" and c.status == 200
    assert c.best_version == "2.0" and c.compatible[0] == "goodlib-2.0-py3-none-any.whl"
    assert c.best_size and c.best_size > 500


def test_html_api_gives_the_same_answer(html_index: LocalIndex) -> None:
    c = check_index(html_index.url, "goodlib", running_target())
    assert c.ok and c.api == "html" and c.best_version == "2.0"
    assert c.files_seen == 2


def test_incompatible_wheel_is_named(index: LocalIndex) -> None:
    c = check_index(index.url, "incompat-lib", running_target())
    assert not c.ok and c.reachable and c.ref == "E503"
    assert "cp27-cp27mu-manylinux1_x86_64" in c.message
    assert "no wheel for CPython" in c.message


def test_requires_python_filters(index: LocalIndex) -> None:
    c = check_index(index.url, "newpy-only", running_target())
    assert c.ok and c.best_version == "0.9"
    c = check_index(index.url, "newpy-only>=1", running_target())
    assert not c.ok and "requires Python >=3.99" in c.message


def test_unknown_project_is_404(index: LocalIndex) -> None:
    c = check_index(index.url, "no-such-thing", running_target())
    assert not c.ok and c.reachable and c.status == 404 and c.ref == "E502"
    assert "no project no-such-thing" in c.message


def test_version_that_does_not_exist(index: LocalIndex) -> None:
    c = check_index(index.url, "goodlib==9.9", running_target())
    assert not c.ok and c.ref == "E503" and "no version that fits" in c.message


def test_index_down_answers_fast_with_an_offline_message() -> None:
    started = time.perf_counter()
    c = check_index(free_port_url(), "torch", running_target(), timeout=3)
    assert time.perf_counter() - started < 10
    assert not c.ok and not c.reachable and c.ref == "E501"
    assert "cannot reach 127.0.0.1" in c.message and "refused" in c.message


def test_server_error_is_not_a_missing_project(wheels: Path) -> None:
    with LocalIndex(wheels, IndexConfig(status_override=503), max_requests=20, lifetime_s=30) as idx:
        c = check_index(idx.url, "goodlib", running_target())
    assert not c.ok and c.reachable and c.status == 503 and c.ref == "E501"


def test_file_index(tmp_path: Path, wheels: Path) -> None:
    """A file:// simple index laid out as <root>/<project>/index.html."""
    root = tmp_path / "simple"
    (root / "goodlib").mkdir(parents=True)
    (root / "goodlib" / "index.html").write_text(
        f'<a href="{(wheels / "goodlib-2.0-py3-none-any.whl").as_uri()}">goodlib-2.0-py3-none-any.whl</a>')
    c = check_index(root.as_uri(), "goodlib", running_target())
    assert c.ok and c.best_version == "2.0"
    assert not check_index(root.as_uri(), "other", running_target()).ok


def test_server_bounds_itself(wheels: Path) -> None:
    idx = LocalIndex(wheels, max_requests=3, lifetime_s=30).start()
    try:
        for _ in range(3):
            requests.get(idx.url + "goodlib/", timeout=5)
        time.sleep(0.5)
        with pytest.raises(requests.ConnectionError):
            requests.get(idx.url + "goodlib/", timeout=2)
    finally:
        idx.stop()


# ---------------------------------------------------------------- targets --------------------

def test_running_target_prefers_specific_tags() -> None:
    t = running_target()
    assert t.tags[0].startswith(f"cp{sys.version_info[0]}{sys.version_info[1]}-")
    assert "py3-none-any" in t.tags


def test_other_python_version_tags() -> None:
    t = target_for_interpreter("3.9.18")
    assert t.tags[0].startswith("cp39-cp39-") and "cp39-abi3-" + t.platforms[0] in t.tags
    assert not any(x.startswith("cp311") for x in t.tags)


def test_target_from_replayed_report() -> None:
    report = {"python": {"version": "3.12.3", "platform_tags": ["cp312-cp312-manylinux_2_39_x86_64"],
                         "machine": "x86_64"}, "os": {"system": "Linux", "glibc": "2.39"}}
    t = target_from_report(Facts.from_report(report))
    assert t is not None
    assert "cp312-cp312-manylinux_2_17_x86_64" in t.tags and "cp312-cp312-manylinux2014_x86_64" in t.tags
    assert "cp312-cp312-linux_x86_64" in t.tags
    win = target_from_report(Facts.from_report({"python": {"version": "3.10.11", "machine": "AMD64"},
                                                "os": {"system": "Windows"}}))
    assert win is not None and win.tags[0] == "cp310-cp310-win_amd64"
    assert target_from_report(Facts.from_report({"python": {}})) is None


# ---------------------------------------------------------------- parsers ---------------------

def _pages(index: LocalIndex) -> List[str]:
    out = [requests.get(index.url + p + "/", timeout=5).text for p in ("goodlib", "broken-app", "incompat-lib")]
    return out


def test_parse_simple_html_reads_attributes(html_index: LocalIndex, index: LocalIndex) -> None:
    text = requests.get(index.url + "newpy-only/", timeout=5).text
    files = parse_simple_html(text, index.url + "newpy-only/")
    assert {f.filename for f in files} == {"newpy_only-1.0-py3-none-any.whl", "newpy_only-0.9-py3-none-any.whl"}
    new = next(f for f in files if "1.0" in f.filename)
    assert new.requires_python == ">=3.99" and new.has_metadata
    assert new.url.startswith(f"http://127.0.0.1:{index.port}/files/")


def test_parse_simple_json_rejects_other_documents() -> None:
    with pytest.raises(ParseError):
        parse_simple_json("[1, 2]", "http://x/")
    with pytest.raises(ParseError):
        parse_simple_json("not json", "http://x/")
    files = parse_simple_json('{"files": [{"filename": "a-1.0-py3-none-any.whl", "url": "a.whl", "size": -1,'
                              ' "yanked": "bad"}, "junk"]}', "http://x/simple/a/")
    assert len(files) == 1 and files[0].size is None and files[0].yanked


def test_parse_simple_html_rejects_non_html() -> None:
    with pytest.raises(ParseError):
        parse_simple_html("just some text", "http://x/")
    assert parse_simple_html("", "http://x/") == []
    assert parse_simple_html("<html><body></body></html>", "http://x/") == []


@pytest.mark.skipif(not REAL_PAGE.is_file(), reason="no local PEP 503 mirror on this machine")
def test_real_pep503_page() -> None:
    text = REAL_PAGE.read_text(encoding="utf-8", errors="replace")
    files = parse_simple_html(text, REAL_PAGE.parent.as_uri() + "/")
    assert files and all(f.filename.startswith("numpy") for f in files)
    check = evaluate_files(IndexCheck(index_url="file:///opt/pypi/simple", requirement="numpy", project="numpy"),
                           files, running_target())
    assert check.files_seen == len(files)


def _mutate(text: str, rnd: random.Random, how: str) -> str:
    lines = text.splitlines(keepends=True)
    if how == "truncate":
        return text[: rnd.randrange(len(text) + 1)]
    if how == "insert":
        at = rnd.randrange(len(text) + 1)
        return text[:at] + "".join(chr(rnd.randrange(0, 0x250)) for _ in range(rnd.randrange(1, 20))) + text[at:]
    if how == "drop" and lines:
        del lines[rnd.randrange(len(lines))]
        return "".join(lines)
    if how == "double" and lines:
        i = rnd.randrange(len(lines))
        lines.insert(i, lines[i])
        return "".join(lines)
    if how == "ansi":
        return "\x1b[32m" + text.replace("\n", "\x1b[0m\n", 3)
    if how == "prompt":
        return "user@host:~$ curl http://127.0.0.1/simple/goodlib/\n" + text
    if how == "crlf":
        return text.replace("\n", "\r\n")
    return text


MUTATIONS = ["truncate", "insert", "drop", "double", "ansi", "prompt", "crlf"]


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), how=st.sampled_from(MUTATIONS), which=st.integers(0, 2))
def test_fuzz_html_parser(html_index: LocalIndex, seed: int, how: str, which: int) -> None:
    pages = _cached_pages(html_index)
    original = pages[which]
    n = len(parse_simple_html(original, "http://x/"))
    text = _mutate(original, random.Random(seed), how)
    try:
        files = parse_simple_html(text, "http://x/")
    except ParseError:
        return
    # A doubled line may repeat an anchor; nothing else may invent one.
    assert len(files) <= n + (1 if how == "double" else 0)


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), how=st.sampled_from(MUTATIONS), which=st.integers(0, 2))
def test_fuzz_json_parser(index: LocalIndex, seed: int, how: str, which: int) -> None:
    pages = _cached_json(index)
    original = pages[which]
    n = len(parse_simple_json(original, "http://x/"))
    text = _mutate(original, random.Random(seed), how)
    try:
        files = parse_simple_json(text, "http://x/")
    except ParseError:
        return
    assert len(files) <= n


_CACHE: dict = {}


def _cached_pages(idx: LocalIndex) -> List[str]:
    key = ("html", idx.port)
    if key not in _CACHE:
        _CACHE[key] = _pages(idx)
    return _CACHE[key]  # type: ignore[no-any-return]


def _cached_json(idx: LocalIndex) -> List[str]:
    key = ("json", idx.port)
    if key not in _CACHE:
        hdr = {"Accept": "application/vnd.pypi.simple.v1+json"}
        _CACHE[key] = [requests.get(idx.url + p + "/", headers=hdr, timeout=5).text
                       for p in ("goodlib", "broken-app", "incompat-lib")]
    return _CACHE[key]  # type: ignore[no-any-return]
