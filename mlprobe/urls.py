"""Package-source locations a person hands to mlprobe (an index URL from the command line or the
environment, a find-links page): checked before anything uses them, so a typo is a clear usage
error and never a confusing "HTTP 404" or a pip traceback later."""

from __future__ import annotations

import os
import re
from typing import Any, Dict, Mapping, Optional
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from .errors import LibraryError

INDEX_SCHEMES = ("http", "https", "file")


class BadIndexLocation(LibraryError):
    """An index URL or find-links location that cannot be used. `missing_folder`: a file:// URL whose
    folder does not exist (else the URL itself is malformed)."""

    def __init__(self, where: str, url: str, why: str, missing_folder: Optional[str] = None) -> None:
        url, why = mask_credentials(url), mask_credentials(why)
        super().__init__(f"{where} is not a usable index location: {url!r} ({why})")
        self.where = where
        self.url = url
        self.why = why
        self.missing_folder = missing_folder


def check_url(url: str, where: str) -> str:
    """`url` without a trailing slash, or BadIndexLocation saying what is wrong with it.
    `where` names where it came from ("--index-url", "MLPROBE_PYTORCH_INDEX_URL")."""
    text = url.strip()

    def bad(why: str) -> BadIndexLocation:
        return BadIndexLocation(where, url, why)

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
    return strip_slash(text)


def strip_slash(url: str) -> str:
    """`url` without the trailing slash of its path (a query or fragment is left as it is)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url.rstrip("/")
    if not parts.query and not parts.fragment:
        return url.rstrip("/")
    return urlunsplit(parts._replace(path=parts.path.rstrip("/")))


def join_path(base: str, *segments: str, slash: bool = False) -> str:
    """`base` with `segments` appended to its path, its query and fragment kept where they belong:
    `…/whl?token=abc` + `cpu` is `…/whl/cpu?token=abc`, never `…/whl?token=abc/cpu`. Each segment is
    percent-quoted (a "/" inside one separates path parts); `slash` ends the path with "/" (a project page of a simple index)."""
    parts = urlsplit(base)
    path = parts.path.rstrip("/")
    for seg in segments:
        # a segment may itself be a path (Jetson's `jp6/cu126`): its slashes stay path separators
        path += "/" + "/".join(quote(part, safe="-._~+!") for part in seg.strip("/").split("/") if part)
    if slash:
        path += "/"
    return urlunsplit(parts._replace(path=path))


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
        raise BadIndexLocation(where, url, f"{url} is a file:// URL; pip reads the project pages from "
                               "that folder", missing_folder=path)


# The user-information part of any URL in a text: everything between "scheme://" and the LAST "@"
# before the host (a password may itself hold an "@": `user:pa@ss@host`).
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<auth>[^\s/?#]*)@")


def _mask(m: "re.Match[str]") -> str:
    auth = m.group("auth")
    if ":" in auth:
        return f"{m.group('scheme')}{auth.split(':', 1)[0]}:****@"
    return f"{m.group('scheme')}****@"


def mask_credentials(text: str) -> str:
    """Every URL in `text` with its password (or its lone token) shown as pip shows it:
    `https://user:****@host/…`, `https://****@host/…`. For anything printed or logged; the URL
    itself still goes to pip and uv unmasked."""
    if "@" not in text or "://" not in text:
        return text
    return _USERINFO.sub(_mask, text)


def strip_credentials(url: Optional[str]) -> Optional[str]:
    """The URL without its user and password, for what is written to files that outlive the install or
    travel (pylock.toml, the pins): uv keeps no credentials in its locks either. pip and uv ask a
    keyring or .netrc for them where the index needs them."""
    if not url or "@" not in url or "://" not in url:
        return url
    return _USERINFO.sub(lambda m: m.group("scheme"), url)


def mask_deep(value: Any) -> Any:
    """mask_credentials over every string of a JSON-like document (keys included)."""
    if isinstance(value, str):
        return mask_credentials(value)
    if isinstance(value, dict):
        return {mask_deep(k): mask_deep(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mask_deep(v) for v in value]
    return value


def mask_doc(doc: Mapping[str, Any]) -> Dict[str, Any]:
    """mask_deep for one JSON object."""
    return {mask_credentials(k): mask_deep(v) for k, v in doc.items()}
