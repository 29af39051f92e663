"""Build: the modules marked ``# streamproto: compiled`` become C extensions through mypyc.

Where mypyc or a C compiler is missing, or the build fails, or ``STREAMPROTO_PURE=1`` is set, the
package is installed as pure Python with a warning (analyzer/native.py). Everything else about the
package is in pyproject.toml.
"""

from __future__ import annotations

import os
import sys
from importlib.util import module_from_spec, spec_from_file_location
from pathlib import Path
from types import ModuleType

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def load_native() -> ModuleType:
    """analyzer/native.py, loaded from its file: the package cannot be imported while it is built."""
    spec = spec_from_file_location("streamproto_native", ROOT / "analyzer" / "native.py")
    assert spec is not None and spec.loader is not None
    native = module_from_spec(spec)
    spec.loader.exec_module(native)
    return native


def say(text: str) -> None:
    print(f"streamproto build: {text}", file=sys.stderr)


def extensions() -> list:
    native = load_native()
    if native.pure_requested():
        say("STREAMPROTO_PURE is set: pure Python")
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        say("mypyc is not installed: pure Python")
        return []
    modules = native.marked(ROOT)
    try:
        os.chdir(ROOT)  # mypyc names the modules after their paths from here
        return mypycify([*modules, "--ignore-missing-imports", "--follow-imports=silent"], opt_level="3")
    except (Exception, SystemExit) as e:  # mypyc exits on a type error
        say(f"mypyc could not compile {len(modules)} modules ({e!r}): pure Python")
        return []


class OptionalBuildExt(build_ext):
    """All or nothing: when one extension fails to build (no C compiler), none is kept, since a
    compiled module needs the shared library mypyc builds beside it."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # noqa: BLE001  (distutils' compiler errors have no common base here)
            for ext in self.extensions:
                built = Path(self.get_ext_fullpath(ext.name))
                if built.exists():
                    built.unlink()
            say(f"the C build failed ({e!r}): pure Python")


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
