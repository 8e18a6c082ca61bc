"""A real multi-node Ray cluster on this machine for the fleet tests and benchmarks/bench_fleet.py:
`ray start --head` and one `ray start --address` per node, each node with its own environment (its
own MLPROBE_REPLAY bundle, its own PATH). Every process a node starts carries a marker variable, so
that a node (or the whole cluster) is stopped by the ids of exactly its own processes, never by name.
Health checks are fast (RAY_health_check_*), so a killed node is marked dead within a few seconds."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Dict, List, Optional

import psutil

HEALTH_ENV = {
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
    "RAY_health_check_initial_delay_ms": "0",
}
MARK = "MLPROBE_TEST_CLUSTER"
NODE_MARK = "MLPROBE_TEST_NODE"


def ray_cli() -> str:
    exe = Path(sys.executable).parent / "ray"
    return str(exe) if exe.exists() else "ray"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalRayCluster:
    def __init__(self) -> None:
        self.id = uuid.uuid4().hex[:12]
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.temp_dir = tempfile.mkdtemp(prefix=f"mlprobe-ray-{self.id}-")
        self.nodes: List[str] = []

    def _env(self, name: str, extra: Dict[str, Optional[str]]) -> Dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("MLPROBE_REPLAY", "RAY_ADDRESS")}
        env.update(HEALTH_ENV)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env[MARK] = self.id
        env[NODE_MARK] = name
        for k, v in extra.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        return env

    def _start(self, argv: List[str], name: str, extra: Dict[str, Optional[str]], timeout: float) -> None:
        proc = subprocess.run([ray_cli(), "start", *argv, "--num-cpus=1", "--disable-usage-stats"],
                              env=self._env(name, extra), capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"ray start for {name} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n"
                               f"{proc.stderr[-4000:]}")
        self.nodes.append(name)

    def start_head(self, name: str = "head", env: Optional[Dict[str, Optional[str]]] = None,
                   timeout: float = 120) -> None:
        self._start(["--head", f"--port={self.port}", "--include-dashboard=false",
                     f"--temp-dir={self.temp_dir}"], name, env or {}, timeout)

    def add_node(self, name: str, env: Optional[Dict[str, Optional[str]]] = None, timeout: float = 120) -> None:
        self._start([f"--address={self.address}"], name, env or {}, timeout)

    def processes(self, node: Optional[str] = None) -> List[psutil.Process]:
        out = []
        for p in psutil.process_iter(["pid"]):
            try:
                env = p.environ()
            except (psutil.Error, OSError):
                continue
            if env.get(MARK) == self.id and (node is None or env.get(NODE_MARK) == node):
                out.append(p)
        return out

    def raylet(self, node: str) -> psutil.Process:
        for p in self.processes(node):
            try:
                if p.name() == "raylet" or "raylet" in " ".join(p.cmdline()[:1]):
                    return p
            except psutil.Error:
                continue
        raise LookupError(f"no raylet for node {node}")

    def kill_raylet(self, node: str) -> int:
        p = self.raylet(node)
        p.send_signal(signal.SIGKILL)
        return int(p.pid)

    def wait_nodes(self, count: int, timeout: float = 60) -> None:
        """Until the cluster's node table lists `count` alive nodes (asked in a child process, so that
        this process never connects to Ray)."""
        code = ("import ray,sys; ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False); "
                "print(sum(1 for n in ray.nodes() if n['Alive']))")
        deadline = time.monotonic() + timeout
        seen = -1
        while time.monotonic() < deadline:
            proc = subprocess.run([sys.executable, "-c", code, self.address], capture_output=True, text=True,
                                  timeout=60, env=self._env("probe", {}))
            try:
                seen = int(proc.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                seen = -1
            if seen >= count:
                return
            time.sleep(1)
        raise TimeoutError(f"the cluster has {seen} alive nodes, expected {count}")

    def stop(self) -> None:
        """SIGTERM then SIGKILL to this cluster's own processes (found by its marker), by pid."""
        procs = self.processes()
        for p in procs:
            try:
                p.terminate()
            except psutil.Error:
                pass
        _, alive = psutil.wait_procs(procs, timeout=5)
        for p in alive:
            try:
                p.kill()
            except psutil.Error:
                pass
