"""A publisher confirm's computed field and Info text: one confirmed publish (settle's common
case, worded directly) reads as the general wording of its span does (ranges_text, expand)."""

from __future__ import annotations

from analyzer.api import Frame
from dissectors.amqp091 import Amqp091Dissector
from dissectors.amqp091 import encode as E
from dissectors.amqp091.tracking import expand, ranges_text


def _acks(acks: list[tuple[int, bool]]) -> list[Frame]:
    s = E.Script().handshake().open_channel(1)
    s.c(E.method("Confirm.Select", 1)).s(E.method("Confirm.SelectOk", 1))
    for i in range(6):
        s.c(E.message(1, b"m%d" % i, exchange="x", routing_key="r"))
    for tag, multiple in acks:
        s.s(E.method("Basic.Ack", 1, delivery_tag=tag, multiple=multiple))
    conn = Amqp091Dissector().connection(False)
    frames = [e for d, data, ts in s.steps for e in conn.feed(d, data, ts) if isinstance(e, Frame)]
    return [f for f in frames if f.command == "Basic.Ack"]


def test_one_confirmed_publish_reads_as_its_span() -> None:
    acks = _acks([(2, False), (1, False), (4, True), (6, False), (5, False)])
    spans = [[(2, 3)], [(1, 2)], [(3, 5)], [(6, 7)], [(5, 6)]]
    for frame, want, multiple in zip(acks, spans, (False, False, True, False, False), strict=True):
        assert not frame.findings
        confirms = next(f for f in frame.fields if f.name == "confirms")
        assert (confirms.value, confirms.display) == (expand(want), ranges_text(want))
        assert frame.info.endswith(f" confirms {ranges_text(want)}" + (" multiple" if multiple else ""))
