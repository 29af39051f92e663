"""Conformance reports for CI (`streamproto check`): one check run's results (:mod:`.results`),
gathered from the engine (:mod:`.collect`), the rule selection applied to them (:mod:`.policy`),
the baseline (:mod:`.baseline`), and the writers: the text summary, JUnit XML, SARIF 2.1.0,
JSON and the self-contained HTML report."""
