"""mlprobe.model.knowledge: one loader for the knowledge tables, one home for each fact, and the lookups the
probes and the rules share (driver -> CUDA, NVIDIA product name -> row)."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

import pytest

from mlprobe.model import knowledge as kb
from mlprobe.model.hw import nvidia as nvhw
from mlprobe.recipes import knowledge

TOOLKIT = kb.rows("nvidia_gpus", "cuda_toolkit_min_driver")


@pytest.mark.parametrize(
    "driver, column, infer, cuda",
    [
        ("570.26", "linux", False, "12.8"),
        ("570.124.06", "linux", False, "12.8"),
        ("520.61.04", "linux", False, None),  # older than the oldest row
        ("610.43.02", "linux", False, "13.3"),
        ("576.01", "windows", False, "12.8"),
        ("576.02", "windows", False, None),  # 12.9's driver: whether 13.0 runs, no Windows number says
        ("591.86", "windows", False, None),
        ("591.86", "windows", True, "13.1"),  # the rules read the Linux number of the same branch
        ("560.94 (beta)", "windows", False, "12.6"),
        ("n/a", "linux", False, None),
        (None, "linux", False, None),
    ],
)
def test_newest_cuda(driver: Optional[str], column: str, infer: bool, cuda: Optional[str]) -> None:
    assert kb.newest_cuda(TOOLKIT, driver, column, infer_windows=infer) == cuda


def test_the_probe_and_the_rules_read_the_same_table() -> None:
    assert nvhw.knowledge() is knowledge().table("nvidia_gpus").doc is kb.table("nvidia_gpus")
    for driver in ("525.60.13", "560.35.03", "580.95.05", "595.58.03"):
        assert nvhw.cuda_for_driver(driver, "Linux") == kb.newest_cuda(TOOLKIT, driver, "linux")


def test_nvidia_name_row_reads_names_as_tools_print_them() -> None:
    for name in ("NVIDIA GeForce RTX 3060", "NVIDIA_GeForce_RTX_3060", "nvidia geforce  rtx 3060"):
        row = kb.nvidia_name_row(kb.rows("nvidia_gpus", "compute_capability_by_name"), name)
        assert row is not None and row["compute_capability"] == "8.6", name
    assert kb.nvidia_name_row([{"pattern": "("}, {"pattern": "X"}], "X") == {"pattern": "X"}
    assert kb.nvidia_name_row([{"no": "pattern"}], "X") is None
    assert kb.nvidia_name_row([], None) is None


def test_a_missing_table_costs_its_lookups_only() -> None:
    assert kb.load("no_such_table") is None
    assert kb.table("no_such_table") == {}
    assert kb.rows("no_such_table") == []
    assert kb.rows("nvidia_gpus", "no_such_list") == []


def test_version_reads_suffixes_and_refuses_words() -> None:
    assert str(kb.version("560.94 (beta)")) == "560.94"
    assert kb.version("12.8") < kb.version("12.10")  # type: ignore[operator]
    assert kb.version("unknown") is None and kb.version(None) is None


# -- one home per fact ------------------------------------------------------------------------------


def _tables_with(key: str) -> List[str]:
    return [stem for stem in kb.stems() if key in kb.table(stem)]


@pytest.mark.parametrize(
    "key, home",
    [
        ("cuda_toolkit_min_driver", "nvidia_gpus"),
        ("cuda_minor_compat", "nvidia_gpus"),
        ("minor_compat", None),  # the old name of cuda_minor_compat, in the removed cuda_drivers.json
        ("xpu_supported_names", "intel_gpus"),
        ("supported_names", None),  # the old name, in the removed intel_xpu.json
    ],
)
def test_each_driver_and_xpu_table_has_one_home(key: str, home: Optional[str]) -> None:
    assert _tables_with(key) == ([home] if home else [])


def test_where_sources_disagree_both_values_stay_with_a_note() -> None:
    doc = kb.table("nvidia_gpus")
    keys = set(doc["source_key"])
    others = [r for r in doc["cuda_minor_compat"] if any(k.endswith("_other") for k in r)]
    assert others, "the CUDA 12.x Windows minimum (528.33 vs 527.41) is a known disagreement"
    for row in others:
        assert row.get("note") and row.get("other_source") in keys, row
    by_major = {r["major"]: r for r in doc["cuda_minor_compat"]}
    assert (by_major[12]["windows"], by_major[12]["windows_other"]) == ("528.33", "527.41")


def test_directml_build_comes_from_the_directml_table() -> None:
    from mlprobe.probes import windows

    builds = [r["windows_min_build"] for r in kb.rows("directml", "packages")]
    assert windows.directml_min_build() == min(builds) == 16299


def test_every_shipped_table_loads_as_an_object() -> None:
    for stem in kb.stems():
        raw: Dict[str, Any] = json.loads((kb.KNOWLEDGE_DIR / f"{stem}.json").read_text(encoding="utf-8"))
        assert kb.load(stem) == raw
