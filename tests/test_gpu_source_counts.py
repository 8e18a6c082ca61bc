"""nvidia-smi sees one GPU, lspci two: the scan says which source saw which GPU, warns that one is
not driven, and the plan counts what the driver sees."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .test_cli_errors import bundle, run

SMI = ("name, driver_version, compute_cap, memory.total [MiB], pci.bus_id, uuid\n"
       "NVIDIA GeForce RTX 3090, 550.54.14, 8.6, 24576 MiB, 00000000:01:00.0, "
       "GPU-11111111-2222-3333-4444-555555555555\n")
LSPCI = ("00:02.0 VGA compatible controller [0300]: Intel Corporation CoffeeLake-S GT2 [UHD Graphics 630] "
         "[8086:3e92]\n"
         "01:00.0 VGA compatible controller [0300]: NVIDIA Corporation GA102 [GeForce RTX 3090] [10de:2204] "
         "(rev a1)\n"
         "02:00.0 VGA compatible controller [0300]: NVIDIA Corporation GA102 [GeForce RTX 3090] [10de:2204] "
         "(rev a1)\n")


def two_on_the_bus(tmp_path: Path) -> Path:
    return bundle(tmp_path / "b", {"nvidia-smi-query.csv": SMI, "lspci.txt": LSPCI})


def test_scan_says_which_source_saw_what(tmp_path: Path) -> None:
    b = two_on_the_bus(tmp_path)
    rc, out, _ = run("scan", "--replay", b)
    assert rc == 0
    rows = [ln for ln in out.splitlines() if "3090" in ln and ln.startswith("│")]
    assert len(rows) == 2
    assert "nvidia-smi" in rows[0] and "lspci" in rows[0]
    assert "nvidia-smi" not in rows[1] and "lspci" in rows[1]
    assert "not driven" in out and "02:00.0" in out
    rc, out, _ = run("scan", "--json", "--replay", b)
    doc = json.loads(out)
    assert [sorted(g["sources"]) for g in doc["gpus"] if g["vendor"] == "nvidia"] == [["nvidia", "pci"], ["pci"]]
    assert any("not driven" in w for w in doc["warnings"])


def test_plan_counts_the_gpus_the_driver_sees(tmp_path: Path) -> None:
    b = two_on_the_bus(tmp_path)
    rc, out, _ = run("plan", "--json", "--replay", b)
    plan = json.loads(out)
    text = json.dumps(plan)
    assert "2 NVIDIA GPUs" not in text
    assert any("sees 1" in w and "02:00.0" in w for w in plan["warnings"])
    assert plan["top"]["torch"] == "torch-cuda"


def test_without_a_driver_answer_the_bus_is_what_there_is(tmp_path: Path) -> None:
    b = bundle(tmp_path / "b", {"lspci.txt": LSPCI})
    rc, out, _ = run("plan", "--json", "--replay", b)
    plan = json.loads(out)
    assert not any("not driven" in w for w in plan["warnings"])


def _bus(i: int) -> str:
    return f"{i >> 16:04x}:{(i >> 8) & 0xff:02x}:{(i >> 3) & 0x1f:02x}.{i % 8}"


def test_merge_pairs_many_gpus_by_bus_id_in_any_order() -> None:
    from mlprobe.model.facts import GpuFacts
    from mlprobe.scan.run import merge_gpus

    n = 600
    smi = [GpuFacts(vendor="nvidia", name="NVIDIA A100", pci_bus_id=_bus(i), uuid=f"GPU-{i:08x}",
                    compute_capability="8.0", sources=("nvidia",)) for i in range(n)]
    pci = [GpuFacts(vendor="nvidia", name="GA100", pci_bus_id=_bus(i), pci_device_id="20b0", sources=("pci",))
           for i in reversed(range(n))]
    merged = merge_gpus([("nvidia", smi), ("pci", pci)])
    assert len(merged) == n
    assert all(g.sources == ("nvidia", "pci") and g.pci_device_id == "20b0" for g in merged)
    assert [g.pci_bus_id for g in merged] == [_bus(i) for i in range(n)]


def test_an_absurd_number_of_gpus_is_capped_with_a_warning(tmp_path: Path) -> None:
    from mlprobe.scan.run import MAX_GPUS_PER_SOURCE

    lines = "".join(f"{_bus(i)} VGA compatible controller [0300]: NVIDIA Corporation GA102 [GeForce RTX 3090] "
                    "[10de:2204] (rev a1)\n" for i in range(MAX_GPUS_PER_SOURCE + 50))
    b = bundle(tmp_path / "b", {"lspci.txt": lines})
    rc, out, _ = run("scan", "--json", "--replay", b)
    doc = json.loads(out)
    assert len(doc["gpus"]) == MAX_GPUS_PER_SOURCE
    assert any("only the first" in w for w in doc["warnings"])


def _count_comparisons(monkeypatch: pytest.MonkeyPatch, n: int, merge: Any = None) -> int:
    """How many times the merge compares two GPUs, for n GPUs seen by nvidia-smi (in bus order)
    and by lspci (in reverse order), as on a host with n GPUs."""
    from mlprobe.model.facts import GpuFacts
    from mlprobe.scan import run as scan_run

    calls = [0]
    real = scan_run._same_gpu

    def counting(a: GpuFacts, b: GpuFacts) -> bool:
        calls[0] += 1
        return real(a, b)

    monkeypatch.setattr(scan_run, "_same_gpu", counting)
    smi = [GpuFacts(vendor="nvidia", name="NVIDIA GeForce RTX 3090", pci_bus_id=_bus(i),
                    uuid=f"GPU-{i:08x}-0000-0000-0000-000000000000", sources=("nvidia",)) for i in range(n)]
    pci = [GpuFacts(vendor="nvidia", name="GeForce RTX 3090", pci_bus_id=_bus(i), pci_device_id="2204",
                    sources=("pci",)) for i in reversed(range(n))]
    merged = (merge or scan_run.merge_gpus)([("nvidia", smi), ("pci", pci)])
    assert len(merged) == n and all(g.sources == ("nvidia", "pci") for g in merged)
    return calls[0]


def test_merge_comparisons_grow_near_linearly(monkeypatch: pytest.MonkeyPatch) -> None:
    """4,000 GPUs from two sources cost about 4,000 comparisons, not 4,000² / 2 (the pairwise merge
    it replaced made 8,002,000 at 4,000): 16 times the GPUs, at most ~16 times the comparisons."""
    counts = {n: _count_comparisons(monkeypatch, n) for n in (250, 1000, 4000)}
    for n, c in counts.items():
        assert c <= 2 * n, counts
    assert counts[4000] <= 20 * counts[250], counts
