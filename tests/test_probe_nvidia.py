"""NVIDIA probe: the nvidia-smi parsers on the real fixture captures, the knowledge lookups, the
probe's merge of several outputs, and mutation fuzzing of every parser."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable, List, Tuple

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mlprobe.errors import ParseError
from mlprobe.scan.host import ReplayHost
from mlprobe.scan.run import scan
from mlprobe.model.hw import nvidia as nvhw
from mlprobe.probes import nvidia as nv

from .fuzz import examples, mutated

FIX = Path(__file__).resolve().parent.parent / "fixtures"


def read(folder: str, name: str) -> str:
    return (FIX / folder / name).read_bytes().decode("utf-8", errors="replace")


# -- parsers on real captures ------------------------------------------------------------------------


XML_CASES = [
    # folder, name, driver, cuda, MiB, bus id, device id, mig mode, mig devices, architecture
    (
        "linux-nvidia-h200-mlprobe-capture",
        "NVIDIA H200",
        "580.159.04",
        "13.0",
        143771,
        "0000:00:06.0",
        "0x2335",
        "Disabled",
        0,
        "Hopper",
    ),
    (
        "linux-nvidia-a100-sxm4-mig-smi-xml",
        "NVIDIA A100-SXM4-40GB",
        "510.47.03",
        "11.6",
        40960,
        "0000:00:04.0",
        "0x20b0",
        "Enabled",
        2,
        "Ampere",
    ),
    (
        "linux-nvidia-rtx3060-smi-xml",
        "NVIDIA GeForce RTX 3060",
        "570.124.04",
        "12.8",
        12288,
        "0000:2d:00.0",
        "0x2487",
        None,
        0,
        "Ampere",
    ),
    (
        "linux-nvidia-rtx3080-smi-xml-schema-v13",
        "NVIDIA GeForce RTX 3080",
        "595.58.03",
        "13.2",
        10240,
        "0000:0c:00.0",
        "0x2216",
        None,
        0,
        "Ampere",
    ),
    (
        "linux-nvidia-tesla-p100-smi-xml",
        "Tesla P100-PCIE-16GB",
        "510.47.03",
        "11.6",
        16384,
        "0000:00:04.0",
        "0x15f8",
        None,
        0,
        "Pascal",
    ),
    (
        "linux-nvidia-tesla-t4-smi-xml",
        "Tesla T4",
        "515.105.01",
        "11.7",
        15360,
        "0000:00:1e.0",
        "0x1eb8",
        None,
        0,
        "Turing",
    ),
]


@pytest.mark.parametrize("case", XML_CASES, ids=[c[0] for c in XML_CASES])
def test_xml_on_real_captures(case: Tuple[Any, ...]) -> None:
    folder, name, driver, cuda, mib, bus, dev, mig, migs, arch = case
    rep = nv.parse_smi_xml(read(folder, "nvidia-smi-q-x.xml"))
    assert (rep.driver_version, rep.cuda_version) == (driver, cuda)
    assert len(rep.gpus) == 1
    g = rep.gpus[0]
    assert (g.name, g.memory_mib, g.pci_bus_id, g.pci_device_id, g.pci_vendor_id) == (
        name,
        mib,
        bus,
        dev,
        "0x10de",
    )
    assert (g.mig_mode, g.mig_devices, g.architecture) == (mig, migs, arch)


def test_xml_mig_slices_are_not_the_gpu_memory() -> None:
    # The MIG slices' <fb_memory_usage><total>19968 MiB</total> come first in document order.
    g = nv.parse_smi_xml(read("linux-nvidia-a100-sxm4-mig-smi-xml", "nvidia-smi-q-x.xml")).gpus[0]
    assert g.memory_mib == 40960 and g.mig_devices == 2


def test_xml_placeholders_are_not_identities() -> None:
    t4 = nv.parse_smi_xml(read("linux-nvidia-tesla-t4-smi-xml", "nvidia-smi-q-x.xml")).gpus[0]
    assert t4.serial is None  # 0000000000000
    rtx = nv.parse_smi_xml(read("linux-nvidia-rtx3080-smi-xml-schema-v13", "nvidia-smi-q-x.xml")).gpus[0]
    assert rtx.serial is None  # REDACTED
    p100 = nv.parse_smi_xml(read("linux-nvidia-tesla-p100-smi-xml", "nvidia-smi-q-x.xml")).gpus[0]
    assert p100.serial == "0324217145110" and p100.uuid == "GPU-d3da8716-eaab-75db-efc1-60e88e1cd55e"


def test_xml_refuses_entities_and_non_xml() -> None:
    bomb = (
        '<?xml version="1.0"?><!DOCTYPE nvidia_smi_log [<!ENTITY a "aaaa">]>'
        "<nvidia_smi_log>&a;</nvidia_smi_log>"
    )
    with pytest.raises(ParseError):
        nv.parse_smi_xml(bomb)
    with pytest.raises(ParseError):
        nv.parse_smi_xml("nvidia-smi: command not found")


def test_xml_truncated_keeps_what_it_read() -> None:
    text = read("linux-nvidia-tesla-t4-smi-xml", "nvidia-smi-q-x.xml")
    cut = text[: text.index("<fb_memory_usage>")]
    g = nv.parse_smi_xml(cut).gpus[0]
    assert g.name == "Tesla T4" and g.pci_bus_id == "0000:00:1e.0" and g.memory_mib is None


Q_CASES = [
    ("linux-nvidia-h100-smi", "NVIDIA H100 80GB HBM3", "590.48.01", "13.1", 81559, "Disabled", 0, None),
    ("linux-nvidia-h100-mig-smi", "NVIDIA H100 80GB HBM3", "590.48.01", "13.1", 81559, "Enabled", 4, None),
    (
        "linux-nvidia-rtx2080super-smi-driver610",
        "NVIDIA GeForce RTX 2080 SUPER",
        "610.57.04",
        "13.3",
        8192,
        None,
        0,
        None,
    ),
    (
        "windows-nvidia-rtx2080super-smi",
        "NVIDIA GeForce RTX 2080 SUPER",
        "591.86",
        "13.1",
        8192,
        None,
        0,
        "WDDM",
    ),
]


@pytest.mark.parametrize("case", Q_CASES, ids=[c[0] for c in Q_CASES])
def test_q_text_on_real_captures(case: Tuple[Any, ...]) -> None:
    folder, name, driver, cuda, mib, mig, migs, model = case
    rep = nv.parse_smi_q(read(folder, "nvidia-smi-q.txt"))
    assert (rep.driver_version, rep.cuda_version) == (driver, cuda)
    assert len(rep.gpus) == 1
    g = rep.gpus[0]
    assert (g.name, g.memory_mib, g.mig_mode, g.mig_devices, g.driver_model) == (name, mib, mig, migs, model)
    assert g.uuid is None and g.serial is None  # redacted upstream to zeros


TABLE_CASES = [
    # folder, gpus, name of the first, truncated, driver, cuda, MiB, mig mode, mig devices
    (
        "linux-nvidia-a100-80gb-pcie-mig-smi",
        1,
        "NVIDIA A100 80GB PCIe",
        False,
        "570.148.08",
        "12.8",
        81920,
        "Enabled",
        4,
    ),
    ("linux-nvidia-gh200-x4-smi", 4, "NVIDIA GH200 120GB", False, "590.48.01", "13.1", 97871, "Disabled", 0),
    (
        "linux-nvidia-h100-mig-smi",
        1,
        "NVIDIA H100 80GB HBM3",
        False,
        "590.48.01",
        "13.1",
        81559,
        "Enabled",
        4,
    ),
    ("linux-nvidia-h100-smi", 1, "NVIDIA H100 80GB HBM3", False, "590.48.01", "13.1", 81559, "Disabled", 0),
    (
        "linux-nvidia-rtx2080super-smi-driver610",
        1,
        "NVIDIA GeForce RTX 2080",
        True,
        "610.57.04",
        "13.3",
        8192,
        None,
        0,
    ),
    ("windows-nvidia-rtx2080super-smi", 1, "NVIDIA GeForce RTX 2080", True, "591.86", "13.1", 8192, None, 0),
    ("linux-nvidia-l40s-smi-query-csv", 1, "NVIDIA L40S", False, "595.80", "13.2", 46068, None, 0),
]


@pytest.mark.parametrize("case", TABLE_CASES, ids=[c[0] for c in TABLE_CASES])
def test_table_on_real_captures(case: Tuple[Any, ...]) -> None:
    folder, count, name, truncated, driver, cuda, mib, mig, migs = case
    rep = nv.parse_smi_table(read(folder, "nvidia-smi.txt"))
    assert (rep.driver_version, rep.cuda_version, len(rep.gpus)) == (driver, cuda, count)
    g = rep.gpus[0]
    assert (g.name, g.name_truncated, g.memory_mib, g.mig_mode, g.mig_devices) == (
        name,
        truncated,
        mib,
        mig,
        migs,
    )


def test_table_gh200_keeps_pci_domains_apart() -> None:
    rep = nv.parse_smi_table(read("linux-nvidia-gh200-x4-smi", "nvidia-smi.txt"))
    assert [g.pci_bus_id for g in rep.gpus] == [
        "0009:01:00.0",
        "0019:01:00.0",
        "0029:01:00.0",
        "0039:01:00.0",
    ]


def test_table_windows_driver_model() -> None:
    g = nv.parse_smi_table(read("windows-nvidia-rtx2080super-smi", "nvidia-smi.txt")).gpus[0]
    assert g.driver_model == "WDDM"


def test_table_driver_failure_message_is_recognised() -> None:
    text = (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that "
        "the latest NVIDIA driver is installed and running.\n"
    )
    rep = nv.parse_smi_table(text)
    assert rep.gpus == [] and rep.notes


def test_csv_on_real_capture_with_many_columns() -> None:
    rep = nv.parse_smi_query_csv(read("linux-nvidia-l40s-smi-query-csv", "nvidia-smi-query.csv"))
    assert rep.driver_version == "595.80" and len(rep.gpus) == 1
    g = rep.gpus[0]
    assert (g.name, g.compute_capability, g.memory_mib, g.pci_bus_id, g.pci_device_id) == (
        "NVIDIA L40S",
        "8.9",
        46068,
        "0000:01:00.0",
        "0x26b9",
    )
    assert g.uuid is None and g.serial is None and g.mig_mode is None


def test_csv_capture_md_columns_and_noheader() -> None:
    # Output quoted in public reports (header order differs from CAPTURES.md's; the header decides).
    text = (
        "index, name, compute_cap, memory.total [MiB], driver_version, compute_mode, mig.mode.current\n"
        "0, Tesla V100-PCIE-32GB, 7.0, 32768 MiB, 570.144, Default, [N/A]\n"
        "1, Tesla V100-PCIE-32GB, 7.0, 32768 MiB, 570.144, Default, [N/A]\n"
    )
    rep = nv.parse_smi_query_csv(text)
    assert [(g.index, g.compute_capability, g.memory_mib) for g in rep.gpus] == [
        (0, "7.0", 32768),
        (1, "7.0", 32768),
    ]
    # `--format=csv,noheader` with CAPTURES.md's columns: the L40S capture's own values in that order
    header, values = [
        r.split(", ") for r in read("linux-nvidia-l40s-smi-query-csv", "nvidia-smi-query.csv").split("\n")[:2]
    ]
    rec = dict(zip(header, values))
    noheader = ", ".join(
        rec[k] for k in ("name", "driver_version", "compute_cap", "memory.total [MiB]", "pci.bus_id", "uuid")
    )
    g = nv.parse_smi_query_csv(noheader + "\n").gpus[0]
    assert (g.name, g.compute_capability, g.memory_mib, g.pci_bus_id) == (
        "NVIDIA L40S",
        "8.9",
        46068,
        "0000:01:00.0",
    )
    with pytest.raises(ParseError):
        nv.parse_smi_query_csv('Field "compute_cap" is not a valid field to query.\n')


PROC_VERSIONS = [
    # as quoted from real machines in public repositories and docs
    (
        (
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  515.76  Mon Sep 12 19:21:56 UTC 2022\n"
            "GCC version:  gcc version 7.5.0 (Ubuntu 7.5.0-3ubuntu1~18.04)\n"
        ),
        "515.76",
    ),
    (
        (
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  440.95.01  Thu May 28 07:03:08 UTC 2020\n"
            "GCC version:  gcc version 7.5.0 (Ubuntu 7.5.0-3ubuntu1~18.04) \n"
        ),
        "440.95.01",
    ),
    (
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build  "
            "(dvs-builder@U16)  Tue May 20 2025\n"
        ),
        "575.57.08",
    ),
]


@pytest.mark.parametrize("text,version", PROC_VERSIONS)
def test_proc_driver_version(text: str, version: str) -> None:
    assert nv.parse_proc_driver_version(text) == version


def test_proc_driver_version_real_capture() -> None:
    text = read("linux-nvidia-h200-mlprobe-capture", "proc-driver-nvidia-version.txt")
    assert nv.parse_proc_driver_version(text) == "580.159.04"


def test_proc_driver_version_rejects_other_text() -> None:
    with pytest.raises(ParseError):
        nv.parse_proc_driver_version("cat: /proc/driver/nvidia/version: No such file or directory\n")


# -- knowledge -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,cc",
    [
        ("NVIDIA H100 80GB HBM3", "9.0"),
        ("NVIDIA GH200 120GB", "9.0"),
        ("NVIDIA H200", "9.0"),
        ("NVIDIA A100-SXM4-40GB", "8.0"),
        ("NVIDIA A100 80GB PCIe", "8.0"),
        ("NVIDIA A10", "8.6"),
        ("NVIDIA A10G", "8.6"),  # GA102 (AWS G5), like the A10
        ("NVIDIA L4", "8.9"),
        ("NVIDIA L40", "8.9"),
        ("Tesla T4", "7.5"),
        ("Tesla P100-PCIE-16GB", "6.0"),
        ("Tesla V100-SXM2-32GB", "7.0"),
        ("Tesla K80", "3.7"),
        ("Tesla K40m", "3.5"),
        ("NVIDIA GeForce RTX 2080 SUPER", "7.5"),
        ("NVIDIA GeForce RTX 2050", "8.6"),
        ("NVIDIA GeForce RTX 4060 Laptop GPU", "8.9"),
        ("NVIDIA GeForce RTX 5090", "12.0"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0"),
        ("NVIDIA B200", "10.0"),
        ("NVIDIA GB200", "10.0"),
        ("NVIDIA B300", "10.3"),
        ("NVIDIA RTX 6000 Ada Generation", "8.9"),
        ("Quadro RTX 6000", "7.5"),
        ("NVIDIA RTX A6000", "8.6"),
        ("GeForce GTX TITAN X", "5.2"),
        ("NVIDIA TITAN Xp", "6.1"),
        ("GeForce GTX 780 Ti", "3.5"),
        ("GeForce GTX 750 Ti", "5.0"),
        ("GeForce GTX 1080 Ti", "6.1"),
        ("NVIDIA GB10", "12.1"),
        ("Jetson AGX Orin", "8.7"),
        ("Orin Nano", "8.7"),
        ("Jetson Nano", "5.3"),
        ("Tesla P4", "6.1"),
        ("Quadro P4000", "6.1"),
    ],
)
def test_compute_capability_table(name: str, cc: str) -> None:
    assert nvhw.compute_capability_for(name) == cc


def test_architecture_and_integrated() -> None:
    assert nvhw.architecture_for("8.9") == "Ada Lovelace" and nvhw.architecture_for("12.0") == "Blackwell"
    assert nvhw.architecture_for("7.2") == "Volta" and nvhw.architecture_for("99.0") is None
    assert nvhw.integrated_for("NVIDIA GB10") is True and nvhw.integrated_for("Jetson AGX Orin") is True
    assert nvhw.integrated_for("NVIDIA GH200 120GB") is False and nvhw.integrated_for("NVIDIA L40S") is False


@pytest.mark.parametrize(
    "driver,system,cuda",
    [
        ("510.47.03", "Linux", None),  # older than the table (it starts at CUDA 11.8)
        ("520.61.05", "Linux", "11.8"),
        ("535.104.05", "Linux", "12.2"),
        ("570.124.04", "Linux", "12.8"),
        ("570.148.08", "Linux", "12.8"),
        ("580.65.06", "Linux", "13.0"),
        ("590.48.01", "Linux", "13.1"),
        ("595.58.03", "Linux", "13.2"),
        ("610.57.04", "Linux", "13.3"),
        ("552.44", "Windows", "12.4"),
        ("531.18", "Windows", "12.1"),
        ("591.86", "Windows", None),  # newer than the last toolkit with a published Windows driver
    ],
)
def test_cuda_for_driver(driver: str, system: str, cuda: str) -> None:
    assert nvhw.cuda_for_driver(driver, system) == cuda


def test_knowledge_rows_are_sourced() -> None:
    doc = nvhw.knowledge()
    keys = set(doc["source_key"])
    for table in (
        "compute_capability_by_name",
        "architecture_by_compute_capability",
        "cuda_toolkit_min_driver",
    ):
        assert doc[table], table
        for row in doc[table]:
            assert row.get("source") in keys, row
    for row in doc["compute_capability_by_name"]:
        re.compile(row["pattern"])
        assert re.fullmatch(r"\d+\.\d", row["compute_capability"])
    ccs = {r["compute_capability"] for r in doc["architecture_by_compute_capability"]}
    assert {r["compute_capability"] for r in doc["compute_capability_by_name"]} <= ccs
    for row in doc["compute_capability_by_name"]:
        for example in row.get("examples", []):
            hit = nvhw.lookup_name(example)
            # every example is claimed by its own row (or an earlier row with the same answer)
            assert hit is not None and hit["compute_capability"] == row["compute_capability"], example


# -- the probe ------------------------------------------------------------------------------------------


def test_probe_merges_outputs_and_derives_facts() -> None:
    out = nv.probe(ReplayHost(FIX / "linux-nvidia-rtx2080super-smi-driver610"))
    assert out.status == "ok" and len(out.gpus) == 1
    g = out.gpus[0]
    # full name from -q (the table truncates it), compute capability from the name table
    assert (g.name, g.compute_capability, g.architecture, g.integrated) == (
        "NVIDIA GeForce RTX 2080 SUPER",
        "7.5",
        "Turing",
        False,
    )
    assert g.pci_device_id == "0x1e81" and g.apis == ("cuda",) and g.sources == ("nvidia",)
    assert out.runtimes.cuda.to_dict() == {"driver_version": "610.57.04", "version": "13.3"}


def test_probe_csv_compute_cap_wins_and_table_gives_cuda() -> None:
    out = nv.probe(ReplayHost(FIX / "linux-nvidia-l40s-smi-query-csv"))
    g = out.gpus[0]
    assert (g.compute_capability, g.architecture, g.memory_bytes) == (
        "8.9",
        "Ada Lovelace",
        46068 * 1024 * 1024,
    )
    assert out.runtimes.cuda.version == "13.2"


def test_probe_mig_counts_instances_not_gpus() -> None:
    for folder in (
        "linux-nvidia-h100-mig-smi",
        "linux-nvidia-a100-80gb-pcie-mig-smi",
        "linux-nvidia-a100-sxm4-mig-smi-xml",
    ):
        out = nv.probe(ReplayHost(FIX / folder))
        assert len(out.gpus) == 1 and out.gpus[0].mig_mode == "Enabled" and out.gpus[0].mig_devices >= 2


def test_probe_absent_without_captures(tmp_path: Path) -> None:
    (tmp_path / "proc-cpuinfo.txt").write_text("processor : 0\n")
    out = nv.probe(ReplayHost(tmp_path))
    assert out.status == "absent" and not out.gpus


def test_probe_kernel_module_only(tmp_path: Path) -> None:
    (tmp_path / "proc-driver-nvidia-version.txt").write_text(PROC_VERSIONS[2][0])
    out = nv.probe(ReplayHost(tmp_path))
    assert out.status == "ok" and out.gpus == []
    # the open kernel module's line: its flavour is kept (Blackwell needs it; knowledge kernel_modules)
    assert out.runtimes.cuda.to_dict() == {"driver_version": "575.57.08", "version": "12.9", "kernel_module": "open"}


def test_probe_garbage_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "nvidia-smi-q-x.xml").write_bytes(b"\x00\xff garbage \x13\x37" * 50)
    out = nv.probe(ReplayHost(tmp_path))
    assert out.status == "error" and out.error and not out.gpus


# -- mutation fuzzing -----------------------------------------------------------------------------------


def _fuzz_cases() -> List[Tuple[str, Callable[[str], nv.SmiReport], str]]:
    cases: List[Tuple[str, Callable[[str], nv.SmiReport], str]] = []
    for folder in sorted(p.name for p in FIX.iterdir() if p.is_dir()):
        for name, parser in (
            ("nvidia-smi-q-x.xml", nv.parse_smi_xml),
            ("nvidia-smi-q.txt", nv.parse_smi_q),
            ("nvidia-smi-query.csv", nv.parse_smi_query_csv),
            ("nvidia-smi.txt", nv.parse_smi_table),
        ):
            if (FIX / folder / name).is_file():
                cases.append((f"{folder}/{name}", parser, read(folder, name)))
    return cases


FUZZ = _fuzz_cases()


@pytest.mark.parametrize("case", FUZZ, ids=[c[0] for c in FUZZ])
@settings(
    max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(data=st.data())
def test_parsers_survive_mutation(
    case: Tuple[str, Callable[[str], nv.SmiReport], str], data: st.DataObject
) -> None:
    _label, parser, text = case
    original = len(parser(text).gpus)
    try:
        rep = parser(data.draw(mutated(text)))
    except ParseError:
        return
    assert len(rep.gpus) <= original
    for g in rep.gpus:
        if g.memory_mib is not None:
            assert g.memory_mib >= 0


@settings(max_examples=examples(80), deadline=None)
@given(blob=st.binary(max_size=2000))
def test_parsers_survive_random_bytes(blob: bytes) -> None:
    text = blob.decode("utf-8", errors="replace")
    for parser in (
        nv.parse_smi_xml,
        nv.parse_smi_q,
        nv.parse_smi_query_csv,
        nv.parse_smi_table,
        nv.parse_proc_driver_version,
    ):
        try:
            parser(text)
        except ParseError:
            pass


def test_fuzz_covers_every_nvidia_output() -> None:
    names = {label.split("/")[1] for label, _, _ in FUZZ}
    assert names == {"nvidia-smi-q-x.xml", "nvidia-smi-q.txt", "nvidia-smi-query.csv", "nvidia-smi.txt"}
    json.dumps([label for label, _, _ in FUZZ])  # labels stay plain strings


@settings(max_examples=examples(60), deadline=None)
@given(data=st.data())
def test_proc_driver_version_survives_mutation(data: st.DataObject) -> None:
    text = read("linux-nvidia-h200-mlprobe-capture", "proc-driver-nvidia-version.txt")
    try:
        version = nv.parse_proc_driver_version(data.draw(mutated(text)))
    except ParseError:
        return
    assert re.fullmatch(r"\d+\.\d+(\.\d+)?", version)


@pytest.mark.parametrize("text", [
    # a data row pasted again with its last field cut off, under a damaged header (found by the
    # mutation test): the same GPU, not a second one
    "user@host:~$ tool --args\nname, driver_version, compute_cap, memory.total [MiB],0 pci.bus_id, uuid\n"
    "NVIDIA H200, 580.159.04, 9.0, 143771 MiB, 00000000:00:06.0, GPU-868df17e-8f33-8d92-8b9e-66e635b10324\n"
    "NVIDIA H200, 580.159.04, 9.0, 143771 MiB, 00000000:00:06.0,",
    # a prompt line before the header is no GPU named after the prompt
    "user@host:~$ tool --args\nname\nname",
])
def test_query_csv_pastes_make_no_extra_gpu(text: str) -> None:
    try:
        gpus = nv.parse_smi_query_csv(text).gpus
    except ParseError:
        return
    assert len(gpus) <= 1 and all("$" not in (g.name or "") for g in gpus)


# -- nvidia-smi -L: each MIG device, the device a job gets -----------------------------------------------

MIG7 = "linux-nvidia-a100-sxm4-80gb-mig-7x1g.10gb-smi-l-datadog-33120"
MIXED = "linux-nvidia-a100-sxm4-80gb-x4-one-mig-smi-l-telegraf-5812"


def test_smi_list_gives_each_mig_device_with_its_profile_and_uuid() -> None:
    rep = nv.parse_smi_list(read(MIG7, "nvidia-smi-L.txt"))
    (gpu,) = rep.gpus
    assert (gpu.index, gpu.name, gpu.mig_mode, gpu.mig_devices) == (0, "NVIDIA A100-SXM4-80GB", "Enabled", 7)
    assert [m[1] for m in gpu.mig] == list(range(7)) and {m[0] for m in gpu.mig} == {"1g.10gb"}
    assert gpu.mig[0][2] == "MIG-feb88891-0321-5fef-9c87-d4af3b54259e"
    # a GPU without MIG lines says nothing of its MIG mode
    rep = nv.parse_smi_list(read(MIXED, "nvidia-smi-L.txt"))
    assert [(g.index, g.mig_mode, len(g.mig)) for g in rep.gpus] == [(0, "Enabled", 4), (1, None, 0), (2, None, 0), (3, None, 0)]


def test_a_hidden_uuid_is_no_uuid_and_other_text_is_refused() -> None:
    (gpu,) = nv.parse_smi_list("GPU 0: Orin (nvgpu) (UUID: [removed])\n").gpus
    assert (gpu.name, gpu.uuid) == ("Orin (nvgpu)", None)
    with pytest.raises(ParseError):
        nv.parse_smi_list("Mon Jan 20 01:36:56 2025\n+-----+\n")


def test_labels_follow_gpu_feature_discovery_for_mig() -> None:
    from mlprobe.fleet.labels import node_labels

    def labels(folder: str) -> dict:
        facts = scan(ReplayHost(FIX / folder))
        return {k.split("/", 1)[1]: v for k, v in node_labels(facts, None).items()}

    one = labels(MIG7)
    assert one["gpu.nvidia.mig-1g.10gb.count"] == "7" and one["gpu.nvidia.mig.count"] == "7"
    assert one["gpu.nvidia.mig.product"] == "A100-SXM4-80GB-MIG-1g.10gb" and one["gpu.nvidia.mig.capable"] == "true"
    mixed = labels(MIXED)
    assert mixed["gpu.nvidia.mig-1g.20gb.count"] == "4" and mixed["gpu.count"] == "4"
    assert "gpu.nvidia.mig.product" not in mixed  # three whole GPUs beside the sliced one


def test_the_plan_names_each_slice_and_how_a_job_gets_one() -> None:
    from mlprobe.plan.multigpu import gpu_use
    from mlprobe.plan.planner import build_plan

    facts = scan(ReplayHost(FIX / MIG7))
    (use,) = gpu_use(build_plan(facts, framework="torch"), facts, {})
    note = next(n for n in use.notes if "MIG device(s)" in n)
    assert note.startswith("7 MIG device(s): GPU 0 MIG 1g.10gb device 0 = MIG-feb88891")
    assert "CUDA_VISIBLE_DEVICES=MIG-feb88891-0321-5fef-9c87-d4af3b54259e" in note
