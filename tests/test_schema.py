"""The shared layout description: decode to field trees, encode back, fail cleanly."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dissectors.schema import Array, Bit, DecodeError, F, Int, Prefixed, Rest, Struct, field_values

U8 = Int("uint8", ">B")
U16 = Int("uint16", ">H")
U32 = Int("uint32", ">I")
STR16 = Prefixed("string", ">h", text=True, null=-1)
BYTES32 = Prefixed("bytes", ">i", text=False, null=-1)

LAYOUT = Struct(
    F("code", U16, enum={1: "OK", 2: "BAD"}),
    F("name", STR16),
    F("blob", BYTES32),
    F("ids", Array(">i", U32)),
    F("pairs", Array(">i", Struct(F("k", STR16), F("v", STR16)))),
    F("a", Bit()), F("b", Bit()), F("c", Bit()),
    F("tail", U8, optional=True),
)


def test_round_trip_and_tree() -> None:
    values = {"code": 1, "name": "stream", "blob": None, "ids": [1, 2, 3],
              "pairs": [{"k": "x", "v": "y"}], "a": True, "b": False, "c": True, "tail": 7}
    raw = LAYOUT.write(values)
    fields, end = LAYOUT.read_fields(memoryview(raw), 0, len(raw))
    assert end == len(raw)
    assert field_values(fields) == values
    code = fields[0]
    assert (code.offset, code.size, code.display) == (0, 2, "OK")
    bits = [f for f in fields if f.name in "abc"]
    assert {f.offset for f in bits} == {len(raw) - 2}  # three bits share one octet
    assert raw[-2] == 0b101


def test_optional_tail_absent() -> None:
    values = {"code": 2, "name": "", "blob": b"\x00", "ids": [], "pairs": [], "a": False, "b": False, "c": False}
    raw = LAYOUT.write(values)
    fields, end = LAYOUT.read_fields(memoryview(raw), 0, len(raw))
    assert end == len(raw) and "tail" not in field_values(fields)


def test_overrun_is_a_decode_error() -> None:
    raw = bytes.fromhex("0001 0010 6162")  # string claims 16 bytes, 2 present
    with pytest.raises(DecodeError) as info:
        LAYOUT.read_fields(memoryview(raw), 0, len(raw))
    assert "overruns" in str(info.value)


def test_huge_count_is_bounded_by_the_bytes_present() -> None:
    raw = bytes.fromhex("7fffffff 00000001")
    with pytest.raises(DecodeError):
        Array(">i", U32).read("ids", memoryview(raw), 0, len(raw))


@given(st.binary(max_size=64))
def test_random_bytes_never_raise_anything_but_decode_error(data: bytes) -> None:
    try:
        LAYOUT.read_fields(memoryview(data), 0, len(data))
    except DecodeError:
        pass


def test_rest_takes_everything() -> None:
    raw = b"abc"
    f, end = Rest().read("r", memoryview(raw), 1, 3)
    assert (f.value, end) == (b"bc", 3)
