"""Replay time against capture size, for every text capture kind the fixtures have: the largest
and the smallest fixture of each kind repeated to 2 MiB and to 8 MiB (the size cap of a capture), replayed alone.
Linear parsing takes about 4x as long at 8 MiB as at 2 MiB; a loop that is quadratic in the number of
records (platforms, devices, GPUs) shows as about 16x. Rows above 6x are marked.

    python benchmarks/bench_capture_sizes.py
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mlprobe.capture import SPECS  # noqa: E402
from mlprobe.host import ReplayHost  # noqa: E402
from mlprobe.scan import scan  # noqa: E402

FIXTURES = ROOT / "fixtures"
SIZES = (2, 8)  # MiB
# Captures with many records per MiB beside the largest and smallest of their kind: the old clinfo
# layout repeats a platform every 1.5 kB (its platform lookup was quadratic: 4.3 s at 8 MiB, now 1.8 s).
EXTRA = ["linux-nvidia-gtx-titan-x-old-style-clinfo/clinfo.txt"]


def fixtures_per_kind() -> List[Tuple[str, Path]]:
    """The largest and the smallest fixture file of every text capture kind (JSON and XML do not
    survive repetition): a small capture repeated is the most records per MiB."""
    by_kind: Dict[str, List[Path]] = {}
    for path in FIXTURES.glob("*/*"):
        if path.name not in SPECS or path.name == "host.json" or path.suffix in (".json", ".xml"):
            continue
        if path.stat().st_size > 64:
            by_kind.setdefault(path.name, []).append(path)
    out: List[Tuple[str, Path]] = []
    for name, paths in sorted(by_kind.items()):
        paths.sort(key=lambda p: p.stat().st_size)
        extra = [FIXTURES / e for e in EXTRA if e.endswith("/" + name) and (FIXTURES / e).is_file()]
        out += [(name, p) for p in dict.fromkeys([paths[-1], paths[0], *extra])]
    return out


def grown(path: Path, mib: int) -> bytes:
    data = path.read_bytes()
    head = b""
    if path.name.endswith(".csv"):  # the header once, the rows repeated
        first, _, data = data.partition(b"\n")
        head = first + b"\n"
    if not data.endswith(b"\n"):
        data += b"\n"
    want = mib * 1024 * 1024 - len(head)
    return (head + data * (want // len(data) + 1))[: mib * 1024 * 1024]


def replay_seconds(folder: Path, name: str, content: bytes, host_json: Path) -> float:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / name).write_bytes(content)
    if host_json.is_file():
        shutil.copy(host_json, folder / "host.json")
    best = float("inf")
    for _ in range(2):
        t = time.perf_counter()
        scan(ReplayHost(folder))
        best = min(best, time.perf_counter() - t)
    return best


def main() -> int:
    rows: List[Tuple[str, str, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="mlprobe-bench-sizes-") as tmp:
        for name, path in fixtures_per_kind():
            times = [replay_seconds(Path(tmp) / "b", name, grown(path, mib), path.parent / "host.json")
                     for mib in SIZES]
            rows.append((name, path.parent.name, times[0], times[1]))
    print(f"{'capture':40} {'from fixture':55} {'2 MiB':>8} {'8 MiB':>8} {'ratio':>6}")
    for name, fixture, small, big in rows:
        ratio = big / small if small else float("inf")
        mark = "  <- superlinear" if ratio > 6 else ""
        print(f"{name:40} {fixture[:55]:55} {small:7.2f}s {big:7.2f}s {ratio:6.1f}{mark}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
