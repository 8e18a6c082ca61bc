"""`nvidia-smi topo -m`: the matrix parser on real captures and pastes, its plain summary, how the
NVIDIA probe attaches each row to nvidia-smi's GPUs, and mutation fuzzing."""

from __future__ import annotations

from pathlib import Path
from typing import List

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mlprobe.errors import ParseError
from mlprobe.probes import nvidia
from mlprobe.probes.nvidia_topo import gpu_topology, link_type, parse_topo_matrix, summary, summary_facts

from .fuzz import examples, mutated
from .hosts import DictHost

FIX = Path(__file__).resolve().parent.parent / "fixtures"
TOPO = "nvidia-smi-topo-m.txt"
BUNDLES = sorted(p.parent.name for p in FIX.glob(f"*/{TOPO}") if not p.parent.name.startswith("synthetic-"))


def read(folder: str, name: str = TOPO) -> str:
    return (FIX / folder / name).read_bytes().decode("utf-8", errors="replace")


# -- real captures ---------------------------------------------------------------------------------

CASES = [
    # folder, GPUs, NICs, summary
    ("linux-nvidia-h200-live-khronos-icd", 1, [], "1 GPU, no peer (CPUs 0-15, NUMA node 0)"),
    ("linux-nvidia-h200-ocl-icd-ignores-filenames", 1, [], "1 GPU, no peer (CPUs 0-15, NUMA node 0)"),
    ("linux-nvidia-h200-doctor-capture", 1, [], "1 GPU, no peer (CPUs 0-15, NUMA node 0)"),
    ("linux-nvidia-h200-cuda-visible-devices-empty-capture", 1, [], "1 GPU, no peer (CPUs 0-15, NUMA node 0)"),
    # the lent H100 (16 vCPUs, one NUMA node: its lscpu.txt), one capture per state it was seen in
    ("linux-nvidia-h100-torch-jax-loaded-libraries-capture", 1, [], "1 GPU, no peer (CPUs 0-15, NUMA node 0)"),
    ("linux-nvidia-h100-ld-library-path-system-cudnn-capture", 1, [], "1 GPU, no peer (CPUs 0-15, NUMA node 0)"),
    ("linux-nvidia-h100-ld-preload-system-cudnn-graph-capture", 1, [], "1 GPU, no peer (CPUs 0-15, NUMA node 0)"),
    ("linux-nvidia-h100-plaidml-hook-off-capture", 1, [], "1 GPU, no peer (CPUs 0-15, NUMA node 0)"),
    ("linux-nvidia-h100-opencl-icd-not-registered-capture", 1, [], "1 GPU, no peer (CPUs 0-15, NUMA node 0)"),
    ("linux-nvidia-h100-plaidml-venv-vendors-folder-hook-on-capture", 1, [], "1 GPU, no peer (CPUs 0-15, NUMA node 0)"),
    ("linux-nvidia-h100-x8-nv18-six-nics-topo", 8, [f"mlx5_{i}" for i in range(6)],
     "all 8 GPUs connected by NVLink (NV18 each pair)"),
    ("linux-nvidia-a100-x8-nv12-pasted-spaces-topo", 8, [], "all 8 GPUs connected by NVLink (NV12 each pair)"),
    ("linux-nvidia-v100-x8-dgx1-hybrid-cube-mesh-topo", 8, ["mlx5_0", "mlx5_2", "mlx5_1", "mlx5_3"],
     "NVLink between 16 of 28 GPU pairs (NV1, NV2); the other 12 over PCIe across NUMA nodes, "
     "through the link between CPU sockets (SYS)"),
    ("linux-nvidia-x2-pcie-phb-pasted-spaces-topo", 2, [], "GPU0-GPU1 over PCIe through the CPU (PHB)"),
    ("linux-nvidia-x4-pcie-phb-soc-mlx4-old-driver-topo", 4, ["mlx4_0"],
     "GPU pairs over PCIe: 2 through the CPU (PHB), 4 across NUMA nodes, through the link between CPU "
     "sockets (SOC)"),
]


def test_every_topology_fixture_has_a_case() -> None:
    assert sorted(c[0] for c in CASES) == BUNDLES


def test_the_redaction_fixture_reads_as_the_real_matrix_it_copies() -> None:
    # synthetic-linux-nvidia-secrets holds the H200 matrix with a shell prompt line planted before it
    planted = parse_topo_matrix(read("synthetic-linux-nvidia-secrets"))
    real = parse_topo_matrix(read("linux-nvidia-h200-live-khronos-icd"))
    assert planted.gpus == real.gpus and summary(planted) == summary(real)


@pytest.mark.parametrize("folder,gpus,nics,words", CASES, ids=[c[0] for c in CASES])
def test_real_matrices(folder: str, gpus: int, nics: List[str], words: str) -> None:
    topo = parse_topo_matrix(read(folder))
    assert len(topo.gpus) == gpus
    assert [topo.nic_names.get(n, n) for n in topo.nics] == nics
    assert summary(topo) == words
    assert topo.notes == []
    for name in topo.gpus:  # every pair is read both ways alike (the matrix is symmetric)
        for peer in topo.gpus:
            if peer != name:
                assert topo.rows[name].links[peer] == topo.rows[peer].links[name]


def test_h200_header_underlined_with_ansi_and_padded_numa_id() -> None:
    text = read("linux-nvidia-h200-live-khronos-icd")
    assert "\x1b[4m" in text  # the real capture: the header row is underlined
    g = gpu_topology(parse_topo_matrix(text), "GPU0")
    assert (g.index, g.cpu_affinity, g.numa_affinity, g.numa_node, g.gpu_numa_id) == (0, "0-15", "0", 0, None)
    assert g.links == () and g.nics == ()


def test_empty_cpu_affinity_is_not_filled_with_the_numa_node() -> None:
    # della-k17g3 prints no CPU affinity for GPU0-GPU3 ("\t\t0\t\tN/A") and "1" for GPU4-GPU7.
    topo = parse_topo_matrix(read("linux-nvidia-h100-x8-nv18-six-nics-topo"))
    assert [(r.cpu_affinity, r.numa_affinity, r.gpu_numa_id) for r in map(topo.rows.get, topo.gpus) if r] == \
        [(None, "0", None)] * 4 + [("1", "1", None)] * 4
    g0 = gpu_topology(topo, "GPU0")
    assert [(n.name, n.code) for n in g0.nics][:3] == [("mlx5_0", "PIX"), ("mlx5_1", "PIX"), ("mlx5_2", "NODE")]
    assert {(link.type, link.nvlinks) for link in g0.links} == {("nvlink", 18)}


def test_dgx1_hybrid_cube_mesh_links() -> None:
    topo = parse_topo_matrix(read("linux-nvidia-v100-x8-dgx1-hybrid-cube-mesh-topo"))
    g0 = gpu_topology(topo, "GPU0")
    assert [(link.peer, link.code) for link in g0.links] == [
        (1, "NV1"), (2, "NV1"), (3, "NV2"), (4, "NV2"), (5, "SYS"), (6, "SYS"), (7, "SYS")]
    facts = summary_facts(topo)
    assert (facts.gpu_pairs, facts.nvlink_pairs) == (28, 16)


@pytest.mark.parametrize("code,expected", [
    ("NV18", ("nvlink", 18)), ("NV1", ("nvlink", 1)), ("PIX", ("pix", None)), ("PXB", ("pxb", None)),
    ("PHB", ("phb", None)), ("NODE", ("node", None)), ("SYS", ("sys", None)), ("SOC", ("sys", None)),
    ("X", ("unknown", None)), ("N/A", ("unknown", None)), ("0-15", ("unknown", None)),
])
def test_link_codes(code: str, expected: tuple) -> None:
    assert link_type(code) == expected


# -- pastes: the shapes people post --------------------------------------------------------------

# The shape of a vLLM `collect_env` report: the matrix indented under "GPU Topology:", NIC row with
# trailing empty cells (from a public vLLM bug report, 8x H100 NV18 with one NIC).
VLLM_REPORT = (
    "    vLLM Build Flags:\n"
    "    CUDA Archs: 5.2 6.0 6.1 7.0 7.2 7.5 8.0 8.6 8.7 9.0+PTX; ROCm: Disabled; Neuron: Disabled\n"
    "    GPU Topology:\n"
    "    GPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "    GPU0\t X \tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\tSYS\t0-103\t0\t\tN/A\n"
    "    GPU1\tNV18\t X \tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\tSYS\t0-103\t0\t\tN/A\n"
    "    GPU2\tNV18\tNV18\t X \tNV18\tNV18\tNV18\tNV18\tNV18\tSYS\t0-103\t0\t\tN/A\n"
    "    GPU3\tNV18\tNV18\tNV18\t X \tNV18\tNV18\tNV18\tNV18\tSYS\t0-103\t0\t\tN/A\n"
    "    GPU4\tNV18\tNV18\tNV18\tNV18\t X \tNV18\tNV18\tNV18\tSYS\t104-207\t1\t\tN/A\n"
    "    GPU5\tNV18\tNV18\tNV18\tNV18\tNV18\t X \tNV18\tNV18\tSYS\t104-207\t1\t\tN/A\n"
    "    GPU6\tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\t X \tNV18\tSYS\t104-207\t1\t\tN/A\n"
    "    GPU7\tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\t X \tSYS\t104-207\t1\t\tN/A\n"
    "    NIC0\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t X \t\t\t\t\n"
    "    \n"
    "    Legend:\n"
    "    \n"
    "      X    = Self\n"
)


def test_indented_matrix_inside_a_report() -> None:
    topo = parse_topo_matrix(VLLM_REPORT)
    assert summary(topo) == "all 8 GPUs connected by NVLink (NV18 each pair)"
    assert [topo.rows[g].cpu_affinity for g in topo.gpus] == ["0-103"] * 4 + ["104-207"] * 4
    assert [gpu_topology(topo, g).numa_node for g in topo.gpus] == [0] * 4 + [1] * 4
    assert [(n.name, n.type) for n in gpu_topology(topo, "GPU5").nics] == [("NIC0", "sys")]


def test_crlf_prompt_and_colours_change_nothing() -> None:
    for folder in BUNDLES:
        text = read(folder)
        plain = parse_topo_matrix(text)
        for variant in (text.replace("\n", "\r\n"), "user@host:~$ nvidia-smi topo --matrix\n" + text,
                        "\x1b[1;32m" + text + "\x1b[0m", "\n".join("   " + ln for ln in text.split("\n"))):
            again = parse_topo_matrix(variant)
            assert [gpu_topology(again, g) for g in again.gpus] == [gpu_topology(plain, g) for g in plain.gpus]


def test_damaged_row_keeps_the_gpu_links_and_says_so() -> None:
    # A real B200 paste lost the tab between two NIC cells ("PXBNODE"), shifting the row's tail.
    text = (
        "\tGPU0\tGPU1\tNIC0\tNIC1\tNIC2\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        "GPU0\t X \tNV18\tPXB\tNODE\tNODE\t0-55,112-167\t0\t\tN/A\n"
        "GPU1\tNV18\t X \tNODE\tPXBNODE\t0-55,112-167\t0\t\tN/A\n"
    )
    topo = parse_topo_matrix(text)
    assert gpu_topology(topo, "GPU1").links[0].code == "NV18"
    assert gpu_topology(topo, "GPU1").numa_node == 0
    assert any("PXBNODE" in n for n in topo.notes)


def test_truncated_paste_reads_what_is_there() -> None:
    text = read("linux-nvidia-h100-x8-nv18-six-nics-topo")
    cut = text[: text.index("\nGPU3\t")]  # rows GPU3..GPU7 lost
    topo = parse_topo_matrix(cut)
    assert len(topo.gpus) == 8  # the header still names them all
    # rows GPU0-GPU2 show the 18 pairs that involve them; the 10 among GPU3-GPU7 are unknown
    assert summary(topo) == "NVLink between 18 of 28 GPU pairs (NV18); the links of 10 GPU pair(s) are not shown"
    assert any("no row for GPU3" in n for n in topo.notes)
    header_only = text.split("\n")[0]
    topo = parse_topo_matrix(header_only)
    assert summary(topo).endswith("the links of 28 GPU pair(s) are not shown")


@pytest.mark.parametrize("text", [
    "", "nvidia-smi: command not found\n", "Legend:\n  X    = Self\n",
    "GPU0 <-> GPU1:\n  * Atomic Supported: no\n",  # prose that names GPU0 is not a header
])
def test_no_matrix_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_topo_matrix(text)


def test_absurd_header_is_refused_fast() -> None:
    header = "\t" + "\t".join(f"GPU{i}" for i in range(5000)) + "\tCPU Affinity\n"
    with pytest.raises(ParseError, match="5,000 devices"):
        parse_topo_matrix(header + "GPU0\t X \n")


# -- fuzz ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("folder", BUNDLES)
@settings(max_examples=examples(60), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_parser_survives_mutation(folder: str, data: st.DataObject) -> None:
    text = read(folder)
    original = parse_topo_matrix(text)
    try:
        topo = parse_topo_matrix(data.draw(mutated(text)))
    except ParseError:
        return
    assert isinstance(summary(topo), str)
    indices = set()
    for name in topo.gpus:
        g = gpu_topology(topo, name)
        indices.add(g.index)
        assert all(link.peer != g.index for link in g.links)
        assert all(link.nvlinks is None or link.nvlinks >= 0 for link in g.links)
    assert len(indices) == len(topo.gpus)
    assert len(topo.gpus) <= len(original.gpus) + 2  # inserted junk cannot make a machine larger


@settings(max_examples=examples(80), deadline=None)
@given(blob=st.binary(max_size=2000))
def test_parser_survives_random_bytes(blob: bytes) -> None:
    try:
        topo = parse_topo_matrix(blob.decode("utf-8", errors="replace"))
    except ParseError:
        return
    summary(topo)


# -- the probe: rows attached to nvidia-smi's GPUs ---------------------------------------------------

CSV = read("linux-nvidia-h200-live-khronos-icd", "nvidia-smi-query.csv")


def _probe(files: dict) -> nvidia.Contribution:
    return nvidia.probe(DictHost(files))


def test_probe_attaches_the_row_to_the_gpu() -> None:
    out = _probe({"nvidia-smi-query.csv": CSV, TOPO: read("linux-nvidia-h200-live-khronos-icd")})
    (g,) = out.gpus
    assert g.name == "NVIDIA H200" and g.topology is not None and g.topology.cpu_affinity == "0-15"
    assert out.runtimes.cuda.topology.summary == "1 GPU, no peer (CPUs 0-15, NUMA node 0)"
    assert out.warnings == []


def test_probe_without_the_capture_is_unchanged() -> None:
    out = _probe({"nvidia-smi-query.csv": CSV})
    assert out.gpus[0].topology is None and not out.runtimes.cuda.written("topology")


def test_probe_notes_a_failed_capture_and_a_count_mismatch() -> None:
    failed = _probe({"nvidia-smi-query.csv": CSV, TOPO: None})
    assert failed.gpus[0].topology is None and "boom" in failed.warnings
    eight = _probe({"nvidia-smi-query.csv": CSV, TOPO: read("linux-nvidia-a100-x8-nv12-pasted-spaces-topo")})
    assert len(eight.gpus) == 1  # nvidia-smi's own listing defines the GPUs
    assert any("lists 1 GPU(s) but its topology matrix 8" in w for w in eight.warnings)


def test_probe_with_only_the_matrix_lists_nameless_gpus() -> None:
    out = _probe({TOPO: read("linux-nvidia-x2-pcie-phb-pasted-spaces-topo")})
    assert [(g.vendor, g.name, g.topology.index if g.topology else None) for g in out.gpus] == \
        [("nvidia", None, 0), ("nvidia", None, 1)]
    assert out.status == "ok"
    assert out.runtimes.cuda.driver_version is None


def test_live_probe_asks_for_the_matrix_only_where_nvidia_smi_lists_gpus() -> None:
    class Live(DictHost):
        kind = "live"

    asked: List[str] = []

    class Counting(Live):
        def get(self, name: str):  # type: ignore[no-untyped-def]
            asked.append(name)
            return super().get(name)

    nvidia.probe(Counting({"proc-driver-nvidia-version.txt": None}))
    assert TOPO not in asked
    asked.clear()
    nvidia.probe(Counting({"nvidia-smi-query.csv": CSV, TOPO: read("linux-nvidia-h200-live-khronos-icd")}))
    assert TOPO in asked

