"""A capture bundle in memory, for probe tests that need a Host without writing files."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

from mlprobe.scan.capture import Capture


class DictHost:
    """Captures by name (None: the capture ran and failed, with `failure`'s status and message),
    environment variables, and `system` as host.json would say it. Subclass to change the class
    attributes for one test module."""

    kind = "replay"
    system = "Linux"
    failure: Tuple[str, str] = ("error", "boom")

    def __init__(self, files: Mapping[str, Optional[str]], env: Optional[Dict[str, str]] = None) -> None:
        self.files, self._env = files, env or {}

    def get(self, name: str) -> Capture:
        if name not in self.files:
            return Capture(name, "absent")
        data = self.files[name]
        if data is None:
            status, error = self.failure
            return Capture(name, status, error=error)
        return Capture(name, "ok", data=data.encode())

    def env(self, name: str) -> Optional[str]:
        return self._env.get(name)

    def env_overrides(self) -> Dict[str, str]:
        return {}

    def info(self) -> Dict[str, Any]:
        return {"system": self.system}
