"""Package-source locations a person hands to mlprobe (an index URL from the command line or the
environment, a find-links page): checked before anything uses them, so a typo is a clear usage
error and never a confusing "HTTP 404" or a pip traceback later."""

from __future__ import annotations

import os
from typing import Optional
from urllib.parse import unquote, urlsplit

from .errors import EXIT_USAGE, MlprobeError

INDEX_SCHEMES = ("http", "https", "file")


def check_url(url: str, where: str) -> str:
    """`url` without a trailing slash, or MlprobeError (E517, exit 2) saying what is wrong with it.
    `where` names where it came from ("--index-url", "MLPROBE_PYTORCH_INDEX_URL")."""
    text = url.strip()

    def bad(why: str) -> MlprobeError:
        return MlprobeError(
            f"{where} is not a usable index location: {url!r}", why=why,
            next_step="give an http://, https:// or file:// URL of a package index (PEP 503: the folder "
                      "that holds one page per project), e.g. https://mirror.example/whl/cpu",
            ref="E517", exit_code=EXIT_USAGE)

    if not text:
        raise bad("it is empty")
    if any(c.isspace() or ord(c) < 32 or c in "<>\"{}|\\^`" for c in text):
        raise bad("it contains spaces, quotes or characters no URL has (a placeholder like <index>?)")
    try:
        parts = urlsplit(text)
    except ValueError as exc:
        raise bad(str(exc)) from None
    if not parts.scheme:
        raise bad("it has no scheme; mlprobe takes http://, https:// or file:// URLs "
                  "(a local folder of wheels goes to --find-links)")
    if parts.scheme.lower() not in INDEX_SCHEMES:
        raise bad(f"the scheme {parts.scheme}:// is not one pip reads indexes from")
    if parts.scheme.lower() in ("http", "https"):
        try:
            host, port = parts.hostname, parts.port
        except ValueError as exc:  # a port that is not a number, or out of range
            raise bad(str(exc)) from None
        if not host:
            raise bad("it names no host")
        del port
    return text.rstrip("/")


def file_url_path(url: str) -> Optional[str]:
    """The local path of a file:// URL (None for other schemes)."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "file":
        return None
    path = unquote(parts.path)
    if os.name == "nt" and len(path) > 2 and path[0] == "/" and path[2] == ":":
        path = path[1:]
    return path


def check_file_url_exists(url: str, where: str) -> None:
    """A file:// index must be a folder that exists: pip would only say it found nothing."""
    path = file_url_path(url)
    if path is not None and not os.path.isdir(path):
        what = "a file, not a folder" if os.path.exists(path) else "a folder that does not exist"
        raise MlprobeError(f"{where} points at {what}: {path}",
                           why=f"{url} is a file:// URL; pip reads the project pages from that folder",
                           next_step="check the path, or pass the URL of an index over http(s)",
                           ref="E517", exit_code=EXIT_USAGE)
