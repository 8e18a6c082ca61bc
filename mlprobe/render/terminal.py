"""Rich tables a person reads in five seconds."""

from __future__ import annotations

from typing import Any, Dict, Optional

from ..model.facts import Facts
from ..model.hw.cpu import ML_FLAGS
from ..ui import count


def human_bytes(n: Optional[int]) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n = n / 1024  # type: ignore[assignment]
    return "?"


# Which tool a probe's GPU came from, in the words a user knows.
SOURCE_NAMES = {"nvidia": "nvidia-smi", "pci": "lspci", "rocm": "rocminfo", "opencl": "OpenCL",
                "windows": "Windows", "apple": "system_profiler", "intel": "sysfs", "collect_env": "collect_env",
                "sycl-ls": "sycl-ls", "xpu-smi": "xpu-smi"}


def placement(g: Any) -> str:
    """NUMA node and CPUs near a GPU, from `nvidia-smi topo -m`: "0 / 0-15"."""
    t = g.topology
    if t is None:
        return ""
    return f"{t.numa_affinity or '?'} / {t.cpu_affinity or '?'}"


def console() -> Any:
    from ..ui import console as make

    return make()


# Probes that list no GPU: on a replay where every other probe found its captures absent, the
# capture holds no GPU listing at all, which is not "none found".
_NO_GPU_PROBES = frozenset(("cpu", "os", "python", "memory", "frameworks", "usb"))


def gpus_not_captured(facts: Facts) -> bool:
    gpu_probes = [p for p in facts.probes if p.name not in _NO_GPU_PROBES]
    return bool(gpu_probes) and all(p.status == "absent" for p in gpu_probes)


def render_scan(facts: Facts, report: Dict[str, Any]) -> None:
    from rich.table import Table

    from ..ui import deep_safe

    con = console()
    # Every value came from a capture: control characters and escape sequences are shown as text,
    # and rich markup in them is printed, not obeyed.
    facts = deep_safe(facts, markup=True)
    report = deep_safe(report, markup=True)
    o, c = facts.os, facts.cpu
    replayed = (report.get("source") or {}).get("kind") == "replay"
    where = "replayed bundle" if replayed else "this machine"
    python_label = "the captured Python" if replayed else "this Python"
    con.print(f"[bold]mlprobe scan[/bold] of {where}: {o.distro or o.system or '?'}"
              + (" (WSL)" if o.wsl else "") + (f", glibc {o.glibc}" if o.glibc else ""))
    level = f"x86-64-v{c.x86_64_level}" if c.x86_64_level else (c.arch or "?")
    ov = facts.overrides or {}
    flags_ov = " [yellow](overridden: MLPROBE_OVERRIDE_CPU_FLAGS)[/yellow]" if "MLPROBE_OVERRIDE_CPU_FLAGS" in ov else ""
    py_ov = " [yellow](overridden)[/yellow]" if "MLPROBE_OVERRIDE_PYTHON_VERSION" in ov else ""
    if ov:
        con.print("[yellow]overridden:[/yellow] " + "; ".join(f"{k}={v}" for k, v in ov.items())
                  + " [dim](facts set by MLPROBE_OVERRIDE_*, not read from the machine)[/dim]")
    flags = set(c.flags)
    shown = []
    for f in ML_FLAGS:
        if f in flags:
            shown.append(f"[green]{f}[/green]")
        elif f in ("avx", "avx2", "fma") and c.arch == "x86_64" and flags:
            # only when the flags are known: a source without flags (dxdiag) proves no absence
            shown.append(f"[red]no {f}[/red]")
    amx = [f for f in ("amx_tile", "amx_bf16", "amx_int8") if f in flags]
    if c.model is None and c.vendor is None and c.threads is None and not c.flags:
        con.print("[bold]CPU[/bold] not in this capture (no /proc/cpuinfo, lscpu or sysctl output); "
                  + (f"architecture {c.arch} ({c.arch_evidence})" if c.arch else "architecture unknown"))
    else:
        con.print(f"[bold]CPU[/bold] {c.model or '?'} ({c.vendor or '?'}, {c.arch or '?'}), "
                  f"{count(c.cores, 'core')} / {count(c.threads, 'thread')}, [bold]{level}[/bold]{flags_ov}"
                  + (f"; memory {human_bytes(facts.memory.total_bytes)}" if facts.memory.total_bytes else ""))
    if c.arch and c.arch_evidence and c.source and c.arch_evidence != c.source and c.model:
        con.print(f"    [dim]architecture from {c.arch_evidence}[/dim]")
    elif c.model and not c.arch:
        con.print("    [dim]architecture unknown: nothing in this capture implies one[/dim]")
    if not flags and c.arch:
        con.print("    [dim]SIMD flags: not in this capture[/dim]")
    elif shown:
        con.print("    " + " ".join(s for s in shown if "amx" not in s or amx))
    if len(c.core_types) > 1:
        con.print("    cores: " + ", ".join(f"{k.count} x {k.name or k.part or '?'}" for k in c.core_types))
    if c.isa_summary:
        con.print(f"    ML ISA: {c.isa_summary}")

    gt = Table(title="GPUs and accelerators", title_justify="left", show_lines=False)
    placed = any(g.topology for g in facts.gpus)  # `nvidia-smi topo -m` was read
    for col in ("vendor", "name", "driver", "target", "memory", "APIs", "seen by") + (("NUMA / CPUs",) if placed else ()):
        gt.add_column(col)
    for g in facts.gpus:
        target = g.compute_capability and f"sm {g.compute_capability}" or g.gfx_target or ""
        if g.runtime_gfx_target and g.runtime_gfx_target != g.gfx_target:
            target += f" (runs as {g.runtime_gfx_target})"
        if g.mig_mode and g.mig_mode.lower() == "enabled":
            target += f", MIG on ({g.mig_devices} slices)"
        gt.add_row(g.vendor, g.name or "?", g.driver_version or "", target,
                   "shared" if g.integrated and not g.memory_bytes else human_bytes(g.memory_bytes) if g.memory_bytes else "",
                   ", ".join(g.apis), ", ".join(SOURCE_NAMES.get(x, x) for x in g.sources),
                   *((placement(g),) if placed else ()))
    for u in facts.usb_accelerators:
        gt.add_row("usb", u.name or f"{u.vendor_id}:{u.product_id}", "", u.kind or "", "", "usb", "lsusb")
    if facts.gpus or facts.usb_accelerators:
        con.print(gt)
    elif replayed and gpus_not_captured(facts):
        apple = (facts.os.system == "Darwin" and (c.arch or "") == "arm64"
                 and ((c.vendor or "").lower() == "apple" or (c.model or "").startswith("Apple")))
        con.print("[bold]GPUs[/bold] not in this capture (it holds no GPU listing: no nvidia-smi, rocminfo, "
                  "lspci, clinfo, system_profiler or dxdiag output)"
                  + (f"; {c.model or 'an Apple chip'} has an integrated Apple GPU, which `mlprobe plan` "
                     "assumes" if apple else ""))
    else:
        con.print("[bold]GPUs[/bold] none found")

    rt = facts.runtimes
    parts = []
    if rt.cuda and (rt.cuda.version or rt.cuda.driver_version):
        parts.append(f"CUDA {rt.cuda.version or '?'} (driver {rt.cuda.driver_version or '?'})")
    if rt.rocm:
        parts.append(f"ROCm {rt.rocm.version}" if rt.rocm.version else "ROCm (version not known)")
    if rt.opencl:
        plats = rt.opencl.platforms
        devs = sum(len(p.devices) for p in plats)
        parts.append(f"OpenCL: {count(len(plats), 'platform')}, {count(devs, 'device')} ("
                     + ", ".join(sorted({str(p.name) for p in plats})) + ")")
    if rt.metal:
        parts.append(f"Metal {rt.metal.support or ''}".strip())
    if rt.directml:
        parts.append("DirectML")
    con.print("[bold]Runtimes[/bold] " + ("; ".join(parts) if parts else "none found"))
    if rt.cuda and rt.cuda.topology is not None:
        con.print("[bold]GPU links[/bold] " + str(rt.cuda.topology.summary))

    if facts.frameworks:
        ft = Table(title=f"Frameworks ({python_label})", title_justify="left")
        ft.add_column("name")
        ft.add_column("version")
        ft.add_column("build")
        for fw in facts.frameworks:
            ft.add_row(fw.name, fw.version or "?", fw.flavour or "")
        con.print(ft)
    else:
        fw_probe = next((p for p in facts.probes if p.name == "frameworks"), None)
        if fw_probe is not None and fw_probe.status != "ok":
            con.print("[bold]Frameworks[/bold] unknown: no list of installed packages in this capture")
        else:
            con.print(f"[bold]Frameworks[/bold] none installed in {python_label} "
                      f"({facts.python.version or '?'}{py_ov})")
    for w in facts.warnings:
        con.print(f"[yellow]warning:[/yellow] {w}")
    bad = [p for p in facts.probes if p.status in ("error", "timeout")]
    if bad:
        con.print("[dim]probes with problems: " + "; ".join(f"{p.name} {p.status}: {p.error}" for p in bad) + "[/dim]")
    flag = ""
    if replayed and not (report.get("source") or {}).get("via"):  # MLPROBE_REPLAY stays set for the next one
        from ..model import shell

        flag = " --replay " + shell.posix([str((report.get("source") or {}).get("bundle") or "BUNDLE")])
    con.print(f"[dim]next: `mlprobe plan{flag}` for what fits, `mlprobe scan{flag} --json` for machines[/dim]")
