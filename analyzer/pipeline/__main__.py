"""``python -m analyzer.pipeline ARGS`` is ``streamproto pipeline ARGS``; being a .py file, it is also
what ``spark-submit`` runs (the README shows the command)."""

from __future__ import annotations

import sys

from analyzer.entry import main

if __name__ == "__main__":
    sys.argv = ["streamproto", "pipeline", *sys.argv[1:]]
    main()
