"""Community ID v1 of a TCP flow (https://github.com/corelight/community-id-spec): the flow hash
Zeek and Suricata log, so a conversation here can be matched with their records."""

from __future__ import annotations

import base64
import struct

try:  # the built-in module: hashlib would load OpenSSL first, a few % of every start (random.py does the same)
    from _sha1 import sha1
except ImportError:  # a Python built without it
    from hashlib import sha1

from analyzer.packets import packed_address


def community_id(a: tuple[str, int], b: tuple[str, int], proto: int = 6, seed: int = 0) -> str:
    """Community ID v1 of a flow, as Zeek and Suricata compute it: the same for both directions."""
    ia, ib = packed_address(a[0]), packed_address(b[0])
    pa, pb = a[1], b[1]
    if (ia, pa) > (ib, pb):  # the spec orders the endpoints: the lower address (then port) first
        ia, ib, pa, pb = ib, ia, pb, pa
    digest = sha1(struct.pack("!H", seed) + ia + ib + struct.pack("!BxHH", proto, pa, pb)).digest()
    return "1:" + base64.b64encode(digest).decode("ascii")

