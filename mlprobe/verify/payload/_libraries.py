# mypy: ignore-errors
# The `libraries` mode of the verify payload: import the frameworks a config names, in that order (as a
# script would), list each one's devices, then report every shared library the process has loaded:
# Linux /proc/self/maps, macOS the dyld image list, Windows the process's module list. Standard library
# only, Python 3.7 compatible.
import os
import sys


def _linux():
    out = []
    with open("/proc/self/maps", "rb") as f:
        for raw in f:
            parts = raw.split(None, 5)
            if len(parts) < 6:
                continue
            path = parts[5].strip().decode("utf-8", "surrogateescape")
            if path.endswith(" (deleted)"):
                path = path[:-len(" (deleted)")]
            if path.startswith("/") and ".so" in os.path.basename(path) and path not in out:
                out.append(path)
    return out


def _darwin():
    import ctypes
    dyld = ctypes.CDLL(None)
    dyld._dyld_image_count.restype = ctypes.c_uint32
    dyld._dyld_get_image_name.restype = ctypes.c_char_p
    dyld._dyld_get_image_name.argtypes = [ctypes.c_uint32]
    out = []
    for i in range(dyld._dyld_image_count()):
        name = dyld._dyld_get_image_name(i)
        if name:
            path = name.decode("utf-8", "surrogateescape")
            if path not in out:
                out.append(path)
    return out


def _windows():
    import ctypes
    from ctypes import wintypes
    psapi = ctypes.WinDLL("psapi")
    kernel = ctypes.WinDLL("kernel32")
    proc = kernel.GetCurrentProcess()
    needed = wintypes.DWORD()
    mods = (wintypes.HMODULE * 4096)()
    if not psapi.EnumProcessModules(proc, mods, ctypes.sizeof(mods), ctypes.byref(needed)):
        return []
    out = []
    buf = ctypes.create_unicode_buffer(32768)
    for i in range(min(needed.value // ctypes.sizeof(wintypes.HMODULE), 4096)):
        if psapi.GetModuleFileNameExW(proc, mods[i], buf, 32768):
            out.append(buf.value)
    return out


def loaded_libraries():
    """(paths, method) of every shared library this process has loaded."""
    if sys.platform.startswith("linux"):
        return _linux(), "/proc/self/maps"
    if sys.platform == "darwin":
        return _darwin(), "dyld image list"
    if sys.platform.startswith("win"):
        return _windows(), "EnumProcessModules"
    return [], None
