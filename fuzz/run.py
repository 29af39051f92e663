"""Coverage-guided fuzzing of one target with atheris (libFuzzer for Python).

    python fuzz/run.py TARGET [CORPUS_DIR ...] [libFuzzer flags]
    python fuzz/run.py --list

TARGET is a dissector name from the registry or ``capture`` (``--list`` prints them). Every
failure rule of fuzz/README.md is enforced: :mod:`fuzz.harness` raises on a crash or an
``engine.dissector_error``, and unless given otherwise this script passes ``-timeout=1``
(a hang: over 1 s on one input), ``-rss_limit_mb=2048`` and ``-max_len=8192`` to libFuzzer (longer inputs are valid, but a campaign
makes four times as many runs with this bound; seeds are cut to it).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULTS = {"-timeout": "1", "-rss_limit_mb": "2048", "-max_len": "8192"}


def main() -> None:
    import atheris

    # Instrument the analyzer and the dissectors (not the libraries): coverage feedback comes from
    # the code under test. Only modules imported inside this block are instrumented, and the
    # registry loads dissectors (and dissectors import parts of themselves) on first use, so every
    # module of both packages is imported here.
    with atheris.instrument_imports(include=["analyzer", "dissectors", "fuzz"]):
        import dissectors
        from fuzz import harness  # the engine and everything of analyzer/ it runs

        for mod in pkgutil.walk_packages(dissectors.__path__, "dissectors."):
            importlib.import_module(mod.name)
        harness.targets()

    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0)
    if args[0] == "--list":
        print("\n".join(harness.targets()))
        sys.exit(0)
    target, rest = args[0], args[1:]
    if target not in harness.targets():
        sys.exit(f"unknown target {target!r}; targets: {', '.join(harness.targets())}")
    given = {a.split("=", 1)[0] for a in rest if a.startswith("-")}
    flags = [f"{k}={v}" for k, v in DEFAULTS.items() if k not in given]

    def one(data: bytes) -> None:
        harness.run(target, data)

    atheris.Setup([sys.argv[0], *flags, *rest], one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
