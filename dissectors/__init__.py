"""Built-in protocol dissectors, one subpackage each, plus helpers they share."""

import analyzer  # noqa: F401  (its import settles whether compiled modules may load: analyzer.native)
