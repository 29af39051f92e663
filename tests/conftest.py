"""Tests marked ``tshark`` compare with Wireshark: without tshark they skip, with the reason, except
in CI (``CI`` set, as `.ci/run` does), where tshark is installed and a skip would hide a failure."""

from __future__ import annotations

import os
import shutil
import socket

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "tshark: compares with tshark (Wireshark); needs the tshark program")
    config.addinivalue_line("markers", "spark: runs Spark in local mode; needs Java 17 and pyspark")
    for name, (program, _) in PROGRAMS.items():
        config.addinivalue_line("markers", f"{name}: needs the {program} program")
    config.addinivalue_line("markers", "capture: captures live on lo; needs root or CAP_NET_RAW")


#: Other markers of tests that need a program, handled like ``tshark``: marker -> (program, Debian package).
PROGRAMS = {"chromium": ("chromium", "chromium"), "rabbitmq": ("rabbitmq-server", "rabbitmq-server")}


def _can_capture() -> bool:
    try:
        socket.socket(socket.AF_PACKET, socket.SOCK_RAW).close()
    except (OSError, AttributeError):  # no rights, or not Linux
        return False
    return True


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("capture") is not None and not _can_capture():
        if os.environ.get("CI"):
            pytest.fail("cannot open a packet socket, and CI must run the live capture tests (run it as root)")
        pytest.skip("live capture needs root or CAP_NET_RAW")
    _require_spark(item)
    for name, (program, package) in PROGRAMS.items():
        if item.get_closest_marker(name) is not None and not shutil.which(program):
            if os.environ.get("CI"):
                pytest.fail(f"{program} is not installed, and CI must run the tests that need it (.ci/run installs it)")
            pytest.skip(f"{program} is not installed (apt-get install {package})")
    if item.get_closest_marker("tshark") is None or shutil.which("tshark"):
        return
    if os.environ.get("CI"):
        pytest.fail("tshark is not installed, and CI must run the Wireshark comparisons (.ci/run installs it)")
    pytest.skip("tshark is not installed (apt-get install tshark); the Wireshark comparisons need it")


def _require_spark(item: pytest.Item) -> None:
    """Tests marked ``spark`` run the pipeline's Spark engine in local mode: as for tshark, a skip
    with the reason without Java or pyspark, a failure in CI (.ci/run installs both)."""
    if item.get_closest_marker("spark") is None:
        return
    import importlib.util

    missing = [what for what, ok in (("java (apt-get install openjdk-17-jre-headless)", shutil.which("java")),
                                     ("pyspark (pip install '.[spark]')", importlib.util.find_spec("pyspark")))
               if not ok]
    if not missing:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{' and '.join(missing)} missing, and CI must run the Spark tests (.ci/run installs them)")
    pytest.skip(f"{' and '.join(missing)} missing: the Spark tests need them")
