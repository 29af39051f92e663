"""tests/pyshark_rows: a pyshark read is tried again only when pyshark reports a tshark crash, and
a crash on every attempt still fails."""

from __future__ import annotations

import pytest
from pyshark.capture.capture import TSharkCrashException

from tests.pyshark_rows import ATTEMPTS, pyshark_rows


def reader(crashes: int, error: type[Exception] = TSharkCrashException):
    calls: list[int] = []

    def read() -> list[int]:
        calls.append(1)
        if len(calls) <= crashes:
            raise error("TShark seems to have crashed (retcode: 255)")
        return [len(calls)]

    return read, calls


def test_a_crash_at_close_is_read_again() -> None:
    read, calls = reader(ATTEMPTS - 1)
    assert pyshark_rows(read) == [ATTEMPTS] and len(calls) == ATTEMPTS


def test_a_crash_on_every_attempt_fails() -> None:
    read, calls = reader(ATTEMPTS)
    with pytest.raises(TSharkCrashException):
        pyshark_rows(read)
    assert len(calls) == ATTEMPTS


def test_other_errors_are_not_read_again() -> None:
    read, calls = reader(1, ValueError)
    with pytest.raises(ValueError):
        pyshark_rows(read)
    assert len(calls) == 1
