"""This machine's own names for the redactor to learn first: its host name, its user and its home
directory, from the system and the environment (the only part of redaction that asks the machine)."""

from __future__ import annotations

from typing import Callable, List, Mapping, Tuple


def _try(get: Callable[[], str]) -> List[str]:
    try:
        value = get()
    except Exception:  # no passwd entry, no host name: nothing to learn from that source
        return []
    return [value] if value else []


def live_seeds(env: Mapping[str, str]) -> Tuple[List[str], List[str], List[str]]:
    """(host names, user names, home directories) of this machine."""
    import getpass
    import platform
    import socket
    from pathlib import Path

    hosts = _try(socket.gethostname) + _try(platform.node) + [env[v] for v in ("HOSTNAME", "COMPUTERNAME") if env.get(v)]
    users = _try(getpass.getuser) + [env[v] for v in ("USER", "USERNAME", "LOGNAME") if env.get(v)]
    homes = _try(lambda: str(Path.home())) + [env[v] for v in ("HOME", "USERPROFILE") if env.get(v)]
    return hosts, users, homes
