"""The payload decoders of :mod:`.messages` and :mod:`.responses` as the connection calls them,
and the request layouts of :mod:`.commands` decoded into a :class:`~dissectors.iggy.types.Decoded`,
so that every payload, regular or not, comes back in one form.
"""

# streamproto: compiled (setup.py builds it with mypyc where it can; analyzer/native.py)

from __future__ import annotations

from typing import Any

from analyzer.api import Field
from dissectors.iggy.commands import SEND_PAYLOAD, Command
from dissectors.iggy.ends import CLEAN_END, INFO_ITEM
from dissectors.iggy.messages import decode_send_messages, polled_clean, polled_info, send_messages_clean
from dissectors.iggy.responses import confirmations_clean, confirmations_info, decode_response
from dissectors.iggy.types import MARKS, Decoded, problems_of
from dissectors.schema import DecodeError, Struct


class Request(Decoded):
    """A request payload decoded: the fields, their problems, and what is wrong with the sizes
    (``cut``: a DecodeError's message and offset; ``trailing``: where unread bytes start)."""

    cut: tuple[str, int, str] | None = None
    trailing: int | None = None

    def fits(self) -> bool:
        """Whether the layout accounts for the bytes exactly (dialect detection's test)."""
        return self.cut is None and self.trailing is None and not any(
            kind in ("size", "count", "reserved") for kind, _ in self.problems)


def request(cmd: Command, dialect: str, data: bytes, start: int) -> Request:
    """The payload ``data[start:]`` of a request of ``cmd`` as ``dialect`` lays it out."""
    layout = cmd.layout(dialect)
    if layout is SEND_PAYLOAD:
        d = decode_send_messages(dialect, data, start, len(data))
        out = Request(d.fields, d.info, d.problems)
        return out
    assert isinstance(layout, Struct)
    first = decode(layout, data, start)
    if first.fits():
        return first
    # Older servers of the same dialect wrote some commands differently: the first that fits.
    for older in cmd.candidates(dialect)[1:]:
        assert isinstance(older, Struct)
        got = decode(older, data, start)
        if got.fits():
            return got
    return first


def decode(layout: Struct, data: bytes, start: int) -> Request:
    """``data[start:]`` as ``layout``: every field that fits, where it was cut, what is left over."""
    end = len(data)
    fields: list[Field] = []
    out = Request(fields)
    view = memoryview(data)
    off = start
    since = MARKS[0]
    try:
        for spec in layout.fields:
            if spec.optional and off >= end:
                break
            try:
                f, off = spec.type.read(spec.name, view, off, end, spec)
            except DecodeError as exc:
                out.cut = (str(exc), exc.offset, spec.name)
                if exc.offset < end:
                    fields.append(Field("undecoded", data[exc.offset:], exc.offset, end - exc.offset))
                break
            fields.append(f)
        else:
            if off < end:
                out.trailing = off
                fields.append(Field("trailing", data[off:], off, end - off))
    finally:
        view.release()
    out.problems = problems_of(fields, since)
    return out


def response(code: int, dialect: str, data: bytes, start: int) -> Decoded:
    """The payload ``data[start:]`` of a successful response to a request of ``code``."""
    return decode_response(code, dialect, data, start, len(data))


# ------------------------------------------------------------------------------ clean layouts

def clean_request(cmd: Command, dialect: str, data: bytes, start: int) -> bool:
    """Whether request(cmd, dialect, data, start) would have nothing to say (see clean and
    messages.send_messages_clean), told without making its Fields; False also where no such test
    exists (the caller then decodes)."""
    layout = cmd.layout(dialect)
    if layout is SEND_PAYLOAD:
        return send_messages_clean(dialect, data, start)
    return type(layout) is Struct and clean(layout, data, start)


def clean(layout: Struct, data: bytes, start: int) -> bool:
    """Whether decode(layout, data, start) would account for every byte without a problem (not
    cut, nothing left over, no value noted), told without making its Fields; False also when a
    field's type has no such test (the caller then decodes). tests/test_iggy_leave_out.py holds
    it to decode."""
    end = len(data)
    off = start
    for spec in layout.fields:
        if spec.optional and off >= end:
            return True
        check = CLEAN_END.get(type(spec.type))
        if check is None:
            return False
        off = check(spec.type, data, off, end)
        if off < 0:
            return False
    return off == end


def info_items(layout: Struct, data: bytes, start: int, names: frozenset[str]) -> dict[str, Any]:
    """What an Info line shows of the fields named ``names`` (by name), for bytes clean() passed,
    from their values alone (ends.INFO_ITEM): no Field is made, the other fields are stepped over
    with their end finders."""
    end = len(data)
    out: dict[str, Any] = {}
    off = start
    for spec in layout.fields:
        if spec.optional and off >= end:
            break
        t = spec.type
        if spec.name in names:
            out[spec.name], off = INFO_ITEM[type(t)](t, data, off, spec)
        else:
            off = CLEAN_END[type(t)](t, data, off, end)
    return out


def clean_response(code: int, dialect: str, data: bytes, start: int) -> bool:
    """Whether response(code, dialect, data, start) would have no problem, told without making its
    Fields: a poll's answer (messages.polled_clean), a V send's confirmations
    (responses.confirmations_clean); False for every other (the caller decodes)."""
    if code == 100:
        return polled_clean(dialect, data, start)
    return code == 101 and dialect == "V" and confirmations_clean(data, start)


def clean_response_info(code: int, data: bytes, start: int) -> str:
    """The Info response(code, ...) gives a payload clean_response passed, from its few values."""
    return polled_info(data, start) if code == 100 else confirmations_info(data, start)
