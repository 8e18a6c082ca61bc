"""verify's speed spread says what varies between the repeats, a median that holds still while the
repeats jump is not "stable", and a busy machine (load above the CPUs, steal, other processes) is
said: measured live with processes that keep the CPUs busy."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from typing import Any, Dict, List

from mlprobe.render.verify_terminal import _stage_line
from mlprobe.verify.payload import _harness as H
from mlprobe.verify.runner import summarise

from .conftest import FIXTURES

CFG = dict(H.DEFAULTS)


def test_the_spread_is_the_range_of_the_repeats() -> None:
    # the busy 2-core machine's runs: 240 to 987 images/s
    assert H.spread([240.0, 987.0, 500.0, 610.0]) == round((987 - 240) / H.median([240.0, 987.0, 500.0, 610.0]), 4)
    assert H.spread([1000.0, 1005.0, 995.0, 1002.0]) == 0.01


def test_a_steady_median_over_jumping_repeats_is_not_stable() -> None:
    jumping = [100.0, 200.0, 150.0, 150.0, 150.0]  # the median did not move; the repeats did
    assert H.median(jumping) == H.median(jumping[:-1])
    assert not H.median_stable(CFG, jumping)
    assert H.median_stable(CFG, [1000.0, 1010.0, 995.0, 1003.0, 1001.0])


def test_what_makes_a_machine_busy() -> None:
    quiet = H.machine_load((100.0, 0.0, 10.0), (101.0, 0.0, 10.9), 1.0, cpus=2, load_1m=0.8)
    assert quiet["busy"] is False and quiet["others"] == 0.05
    loaded = H.machine_load(None, None, 1.0, cpus=2, load_1m=3.1)
    assert loaded["busy"] and loaded["why"] == "load average 3.1 on 2 CPUs"
    stolen = H.machine_load((100.0, 0.0, 10.0), (101.0, 0.2, 11.0), 1.0, cpus=2, load_1m=0.5)
    assert stolen["busy"] and "stolen by the hypervisor" in stolen["why"]
    others = H.machine_load((100.0, 0.0, 10.0), (102.0, 0.0, 11.0), 1.0, cpus=2, load_1m=0.5)
    assert others["busy"] and "other processes used 50 %" in others["why"]


def test_a_machine_kept_busy_by_other_processes_is_seen_as_busy() -> None:
    if H.cpu_times() is None:
        import pytest

        pytest.skip("no /proc/stat here")
    cpus = H.usable_cpus()
    burners = [subprocess.Popen([sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<20: pass"])
               for _ in range(cpus)]
    try:
        time.sleep(0.5)
        before, t0 = H.cpu_times(), time.perf_counter()
        time.sleep(1.5)
        load = H.machine_load(before, H.cpu_times(), time.perf_counter() - t0)
    finally:
        for b in burners:
            b.kill()
            b.wait()
    assert load["busy"], load
    assert load["others"] is not None and load["others"] >= 0.25, load


def _doc_with(load: Dict[str, Any]) -> Dict[str, Any]:
    path = FIXTURES / "verify-linux-x86-64-torch-2.13-cpu" / "result.json"
    doc: Dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    doc["results"][0]["speed"]["machine_load"] = load
    return doc


def test_a_busy_machine_is_said_in_the_summary_and_the_speed_line() -> None:
    busy = H.machine_load(None, None, 1.0, cpus=2, load_1m=3.1)
    lines: List[str] = summarise(_doc_with(busy))
    assert any("The machine was busy while torch cpu timed (load average 3.1 on 2 CPUs)" in ln for ln in lines)
    quiet = H.machine_load(None, None, 1.0, cpus=2, load_1m=0.2)
    assert not any("busy" in ln for ln in summarise(_doc_with(quiet)))
    line = _stage_line("speed", {"images_per_s": 500.0, "repeats": 5, "spread": 1.2, "machine_load": busy})
    assert "120.0% between the fastest and slowest repeat" in line and "the machine was busy" in line


def test_the_schema_takes_the_load() -> None:
    from mlprobe.verify.schema import validate

    doc = _doc_with(H.machine_load((1.0, 0.0, 0.5), (2.0, 0.0, 1.0), 1.0, cpus=2, load_1m=2.5))
    assert validate(doc) == []
    buf = io.StringIO()
    from mlprobe.render.verify_terminal import render_verify

    render_verify(dict(doc, summary=summarise(doc)), stream=buf)
    assert "busy" in buf.getvalue()
