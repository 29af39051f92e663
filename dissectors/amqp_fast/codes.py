"""Reply codes, explained by their digits (RFC 006 §2.2.10).

RFC 006 says only that a reply code has three digits, "the first digit signals the severity, the
second the nature of the error, and the last provides more detail"; the code list itself (AMQ RFC
011) does not survive. The digit meanings here follow the FTP/SMTP convention such 3-digit codes
were modelled on (RFC 959 §4.2: 1 preliminary, 2 success, 3 intermediate, 4 transient failure,
5 permanent failure), fitted to the codes RFC 006 itself names: 200 (ok), 310 (message not found),
311 (message too large), 540 (not implemented), 542 (invalid message contents).
"""

from __future__ import annotations

SEVERITY = {
    1: "preliminary",
    2: "success",
    3: "warning: the command completed but did not do all it asked",
    4: "soft error: the command failed, the dialogue can go on",
    5: "hard error: the resource (handle, channel, connection) is closed",
}
NATURE = {
    0: "syntax",
    1: "message",
    2: "connection",
    3: "access",
    4: "processing",
    5: "resources",
}
#: The codes RFC 006 itself names.
NAMED = {200: "ok", 310: "message not found", 311: "message too large", 540: "not implemented",
         542: "invalid message contents"}


def explain(code: int) -> str:
    """``310`` -> ``message not found; 3xx warning: ..., x1x message``."""
    first, second = code // 100, code // 10 % 10
    if code > 999 or first not in SEVERITY:
        return f"no reply code (first digit {first} is no severity)"
    parts = [f"{first}xx {SEVERITY[first]}"]
    if first >= 3:  # the nature of what went wrong
        parts.append(f"x{second}x {NATURE.get(second, 'unassigned nature')}")
    name = NAMED.get(code)
    return f"{name}; " + ", ".join(parts) if name else ", ".join(parts)


def severity(code: int) -> int:
    """The first digit when it is a severity (1-5), else 0."""
    first = code // 100
    return first if code <= 999 and first in SEVERITY else 0
