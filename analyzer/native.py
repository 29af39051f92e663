"""Modules compiled by mypyc, and running without them.

setup.py compiles every module of the package whose source holds a line starting with
``# streamproto: compiled`` into a C extension through mypyc, when mypyc and a C compiler are at
hand; where either is missing or the build fails, or with ``STREAMPROTO_PURE=1`` at install, the
package stays pure Python. The source is the same either way: the compiled module is the typed
Python module, built.

``STREAMPROTO_PURE=1`` at run time imports every module of the package from its source even where
a compiled one lies beside it (Python prefers the extension): tests/test_native.py runs the views of
the bundled captures both ways and compares them byte for byte.

In a marked module, the constants its loops read are declared ``Final``: mypyc keeps a Final name in
a C static (a literal one, of this or another module, is written into the code), where any other
global, or a name imported from a module that is not compiled, is a dictionary lookup at every use.
Memos and bounds that tests replace through ``monkeypatch`` stay plain globals.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib import import_module
from importlib.machinery import EXTENSION_SUFFIXES, ModuleSpec
from importlib.util import spec_from_file_location
from pathlib import Path
from types import ModuleType

PACKAGES = ("analyzer", "dissectors")
MARK = "# streamproto: compiled"


def marked(root: Path) -> list[str]:
    """The modules marked to be compiled, as paths relative to the project at ``root`` (setup.py
    loads this file by its path: the package itself cannot be imported while it is being built)."""
    return sorted(path.relative_to(root).as_posix() for package in PACKAGES
                  for path in (root / package).rglob("*.py")
                  if any(line.startswith(MARK) for line in path.read_text(encoding="utf-8").splitlines()))


def module_name(path: str) -> str:
    """``dissectors/kit/sequence.py`` -> ``dissectors.kit.sequence``."""
    return path.removesuffix(".py").replace("/", ".")


def marked_modules(root: Path) -> list[str]:
    """The marked modules' names."""
    return [module_name(path) for path in marked(root)]


def not_compiled(root: Path) -> list[str]:
    """The marked modules that run from source here (each is imported to tell)."""
    return [name for name in marked_modules(root) if not is_compiled(import_module(name))]


def pure_requested() -> bool:
    return os.environ.get("STREAMPROTO_PURE", "") not in ("", "0")


class SourceOnly:
    """Finds the package's modules as their ``.py`` files, never as extensions (a meta path finder
    needs only find_spec; importlib.abc's base class would import importlib.resources, tempfile
    and random at every start)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if path is None or fullname.partition(".")[0] not in PACKAGES:
            return None
        leaf = fullname.rpartition(".")[2]
        for entry in path:
            file = os.path.join(entry, leaf + ".py")
            if os.path.isfile(file):
                return spec_from_file_location(fullname, file)
        return None  # a subpackage: the usual finders take it (its __init__ is never compiled)


def install() -> None:
    """With ``STREAMPROTO_PURE`` set, import the package's modules from source from now on."""
    if pure_requested() and not any(isinstance(f, SourceOnly) for f in sys.meta_path):
        sys.meta_path.insert(0, SourceOnly())


def is_compiled(module: ModuleType) -> bool:
    return (getattr(module, "__file__", None) or "").endswith(tuple(EXTENSION_SUFFIXES))


def compiled_modules() -> list[str]:
    """The package's modules imported so far that run compiled."""
    return sorted(name for name, module in list(sys.modules.items())
                  if name.partition(".")[0] in PACKAGES and is_compiled(module))
