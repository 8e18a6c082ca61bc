"""PlaidML compatibility shim: lets plaidml 0.7.0 + keras 2.2.4 (both from 2019) run on today's
Python (3.10+) and numpy (2.x).

`install_shim(site_packages_dir)` writes the shim module, `_mlprobe_plaidml_compat.py` (SHIM_SOURCE
below), into the environment's site-packages. The venv's one start-up hook (venvconf/hook.py:
`_mlprobe_startup.pth` importing `_mlprobe_startup`) imports it when that interpreter starts, so the
shim is active before any user code imports Keras; the shim has no `.pth` of its own (an older mlprobe
wrote `_mlprobe_plaidml_compat.pth`: install_shim removes it).

What the shim does, each only where the name is missing:

1. when `collections` is imported (at once, if it already is): the ABC names Python 3.10 removed
   from `collections` (Iterable, Mapping, MutableMapping, Sequence, Callable, ...) become aliases of
   `collections.abc`; start-up itself does not import `collections` (a few ms). Keras 2.2.4 does
   `from collections import Iterable` (keras/callbacks.py) and fails to import without it.
2. when `keras`, `plaidml` or `keras_preprocessing` is first imported (a meta-path hook, so other
   programs in the environment do not pay for numpy): numpy's removed aliases (np.Inf, np.NaN,
   np.float, np.int, np.bool, np.object, np.str, np.string_, np.unicode_, np.float_, np.complex_,
   np.asscalar) come back (keras 2.2.4 uses np.Inf in EarlyStopping/ModelCheckpoint, np.string_
   in HDF5Matrix, keras_preprocessing np.unicode_), and `inspect.getargspec` (removed in 3.11,
   used by keras.preprocessing.image) is rebuilt on `inspect.getfullargspec`.
3. after `plaidml.keras` is imported: its backend finder, written for the pre-3.4 import protocol
   (find_module/load_module only), gains `find_spec`; Python 3.12 no longer calls find_module, so
   without this `install_backend()` silently does nothing there.
4. after `keras.engine.saving` is imported: h5py 3 returns `str` for string attributes where h5py 2
   returned bytes, and keras 2.2.4's `load_model` calls `.decode('utf8')` on them; string
   attributes read back as a `str` subclass that also has `.decode()`, and lists of names as
   fixed-length bytes arrays, as h5py 2 gave. (h5py 2 has no wheels for Python >= 3.10.)

PlaidML itself still needs a device: `write_settings` writes the settings file that `plaidml-setup`
would (PLAIDML_DEVICE_IDS, PLAIDML_EXPERIMENTAL), so no interactive step is needed.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Iterable, Union

MODULE_NAME = "_mlprobe_plaidml_compat"
PTH_NAME = MODULE_NAME + ".pth"

# Runs inside the PlaidML environment at every interpreter start: Python 3.7 compatible, standard
# library only, cheap, and it must never raise (a failing .pth line only prints a warning, but a
# broken shim should not even do that).
SHIM_SOURCE = r'''"""Written by mlprobe (mlprobe.shims.plaidml_compat): lets plaidml 0.7.0 + keras 2.2.4 run on
Python >= 3.10 and numpy 2.x. Imported at start-up by mlprobe's start-up hook (_mlprobe_startup.py);
`mlprobe install --detach VENV` removes both."""
import sys

_ABC_NAMES = (
    "Awaitable", "Coroutine", "AsyncIterable", "AsyncIterator", "AsyncGenerator", "Hashable",
    "Iterable", "Iterator", "Generator", "Reversible", "Sized", "Container", "Callable", "Collection",
    "Set", "MutableSet", "Mapping", "MutableMapping", "MappingView", "KeysView", "ItemsView",
    "ValuesView", "Sequence", "MutableSequence", "ByteString",
)

_NUMPY_ALIASES = (
    ("Inf", "inf"), ("Infinity", "inf"), ("PINF", "inf"), ("NaN", "nan"), ("NAN", "nan"),
    ("string_", "bytes_"), ("unicode_", "str_"), ("float_", "float64"), ("complex_", "complex128"),
)
_NUMPY_BUILTINS = (("float", float), ("int", int), ("bool", bool), ("object", object), ("str", str),
                   ("complex", complex), ("unicode", str), ("long", int))
_PRE_HOOKS = ("keras", "plaidml", "keras_preprocessing", "keras_applications")
_done = set()


def patch_collections():
    try:
        import collections
        import collections.abc as abc
        for name in _ABC_NAMES:
            if not hasattr(collections, name) and hasattr(abc, name):
                setattr(collections, name, getattr(abc, name))
    except Exception:
        pass


def _has(mod, name):
    try:
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return name in vars(mod) or hasattr(mod, name)
    except Exception:
        return False


def patch_numpy():
    if "numpy" in _done:
        return
    _done.add("numpy")
    try:
        import numpy as np
    except Exception:
        return
    try:
        for old, new in _NUMPY_ALIASES:
            if not _has(np, old) and _has(np, new):
                setattr(np, old, getattr(np, new))
        for old, value in _NUMPY_BUILTINS:
            if not _has(np, old):
                setattr(np, old, value)
        if not _has(np, "NINF"):
            np.NINF = -np.inf
        if not _has(np, "asscalar"):
            np.asscalar = lambda a: a.item()
    except Exception:
        pass


def patch_inspect():
    try:
        import inspect
        if hasattr(inspect, "getargspec"):
            return
        from collections import namedtuple
        ArgSpec = namedtuple("ArgSpec", "args varargs keywords defaults")

        def getargspec(func):
            spec = inspect.getfullargspec(func)
            return ArgSpec(spec.args, spec.varargs, spec.varkw, spec.defaults)

        inspect.ArgSpec = ArgSpec
        inspect.getargspec = getargspec
    except Exception:
        pass


def patch_plaidml_keras(mod):
    """plaidml.keras._PlaidMLBackendFinder has find_module/load_module only: add find_spec."""
    try:
        import importlib.util
        finder = getattr(mod, "_PlaidMLBackendFinder", None)
        if finder is None or "find_spec" in vars(finder):
            return

        class _Loader(object):
            def __init__(self, owner):
                self.owner = owner

            def create_module(self, spec):
                return self.owner.load_module(spec.name)

            def exec_module(self, module):
                pass

        def find_spec(self, fullname, path=None, target=None):
            if self.find_module(fullname, path) is None:
                return None
            return importlib.util.spec_from_loader(fullname, _Loader(self))

        finder.find_spec = find_spec
        for hook in sys.meta_path:  # a finder installed before this patch ran
            if isinstance(hook, finder):
                hook.find_spec = find_spec.__get__(hook, finder)
    except Exception:
        pass


class _DecodableStr(str):
    """A str that also answers .decode(), as the bytes h5py 2 returned did."""

    def decode(self, encoding="utf-8", errors="strict"):
        return str(self)


def patch_h5py(_module=None):
    """h5py 3 returns str where h5py 2 returned bytes; keras 2.2.4's load_model calls .decode()."""
    try:
        import h5py._hl.attrs as attrs
    except Exception:
        return
    manager = attrs.AttributeManager
    if getattr(manager.__getitem__, "_mlprobe", False):
        return
    original = manager.__getitem__

    def getitem(self, name):
        value = original(self, name)
        if isinstance(value, str):
            return _DecodableStr(value)
        if getattr(value, "dtype", None) is not None and value.dtype == object:
            try:  # h5py 2 gave fixed-length bytes ('S') arrays for lists of names
                import numpy as np
                items = [e.encode("utf-8") if isinstance(e, str) else e for e in value.reshape(-1)]
                if all(isinstance(e, bytes) for e in items):
                    return np.array(items).reshape(value.shape)
            except Exception:
                pass
        return value

    getitem._mlprobe = True
    manager.__getitem__ = getitem


def _collections_loaded(_module=None):
    patch_collections()


# collections itself: a program that imports it (`from collections import Iterable`) gets the
# aliases as it loads, without the start-up paying for importing it (python -c pass does not).
_POST_HOOKS = {"collections": _collections_loaded, "plaidml.keras": patch_plaidml_keras,
               "keras.engine.saving": patch_h5py}


class _PostLoader(object):
    def __init__(self, loader, after):
        self._loader, self._after = loader, after

    def create_module(self, spec):
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create else None

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._after(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _Hook(object):
    """Meta-path finder that patches before keras/plaidml load and after plaidml.keras loads."""
    _busy = False

    def find_spec(self, fullname, path=None, target=None):
        if self._busy:
            return None
        if fullname in _PRE_HOOKS:
            patch_collections()
            patch_inspect()
            patch_numpy()
        after = _POST_HOOKS.get(fullname)
        if after is None:
            return None
        try:
            self._busy = True
            import importlib.machinery
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        except Exception:
            return None
        finally:
            self._busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _PostLoader(spec.loader, after)
        return spec

    def find_module(self, fullname, path=None):  # Python < 3.4 protocol: never used here
        return None


def install():
    if "collections" in sys.modules:
        patch_collections()
    if not any(isinstance(h, _Hook) for h in sys.meta_path):
        sys.meta_path.insert(0, _Hook())
    for name, after in _POST_HOOKS.items():
        if name in sys.modules:
            after(sys.modules[name])


try:
    install()
except Exception:
    pass
'''

PTH_LINE = f"import {MODULE_NAME}\n"  # what an older mlprobe's own .pth held


def install_shim(site_packages_dir: Union[str, "os.PathLike[str]"]) -> Path:
    """Write the shim module into `site_packages_dir` (the start-up hook imports it) and remove the
    shim's own .pth an older mlprobe wrote; returns the module's path. Idempotent."""
    site = Path(site_packages_dir)
    if not site.is_dir():
        raise FileNotFoundError(f"no site-packages folder at {site}")
    module = site / (MODULE_NAME + ".py")
    module.write_text(SHIM_SOURCE, encoding="utf-8")
    legacy = site / PTH_NAME
    if legacy.is_file() and legacy.read_text(encoding="utf-8", errors="replace").strip() == PTH_LINE.strip():
        legacy.unlink()
    return module


def uninstall_shim(site_packages_dir: Union[str, "os.PathLike[str]"]) -> bool:
    """Remove what install_shim wrote; True if anything was removed."""
    site = Path(site_packages_dir)
    removed = False
    for name in (PTH_NAME, MODULE_NAME + ".py"):
        p = site / name
        if p.exists():
            p.unlink()
            removed = True
    cache = site / "__pycache__"
    if cache.is_dir():
        for p in cache.glob(MODULE_NAME + ".*.pyc"):
            p.unlink()
    return removed


def write_settings(path: Union[str, "os.PathLike[str]"], device_ids: Iterable[str],
                   experimental: bool = False) -> Path:
    """Write a PlaidML settings file (what `plaidml-setup` saves to ~/.plaidml): the device to open
    and whether experimental devices (llvm_cpu.0) are enabled. Point PLAIDML_SETTINGS at it, or
    write it to ~/.plaidml."""
    p = Path(path)
    doc = {"PLAIDML_DEVICE_IDS": list(device_ids), "PLAIDML_EXPERIMENTAL": bool(experimental)}
    p.write_text(json.dumps(doc, indent=4, sort_keys=True) + "\n", encoding="utf-8")
    return p


def _main(argv: "list[str]") -> int:
    """`python plaidml_compat.py [SITE_PACKAGES]`: write the shim module into SITE_PACKAGES, or into the
    running interpreter's purelib, with a .pth of its own (standard library only: for a by-hand
    set-up without mlprobe; `mlprobe install` loads it through its start-up hook instead)."""
    import sysconfig

    target = argv[0] if argv else sysconfig.get_paths()["purelib"]
    module = install_shim(target)
    (Path(target) / PTH_NAME).write_text(PTH_LINE, encoding="utf-8")
    print(module)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
