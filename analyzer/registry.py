"""Finding dissectors: every protocol, built-in or third-party, registers through one entry point group."""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import sys
from collections.abc import Iterable
from functools import cache

from analyzer.api import Dissector

GROUP = "streamproto.dissectors"


def declared(group: str = GROUP) -> list[tuple[str, str]]:
    """The entry points of ``group`` that installed distributions declare, as (name, "module:attr"),
    sorted by name: what ``importlib.metadata.entry_points(group=...)`` finds (each distribution
    once, the first on ``sys.path`` by normalised name; tests/test_registry.py compares the two).

    Read here from the ``entry_points.txt`` of each ``*.dist-info``/``*.egg-info`` directory,
    because ``importlib.metadata`` costs about 40 ms to import and to read every distribution's
    metadata: a third of the start of every ``streamproto`` run."""
    seen: set[str] = set()
    found: list[tuple[str, str]] = []
    for entry in sys.path:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:  # gone, a file, a zip archive: no metadata directories to read
            continue
        for name in names:
            stem, dot, kind = name.rpartition(".")
            if not dot or kind not in ("dist-info", "egg-info"):
                continue
            dist = re.sub(r"[-_.]+", "_", stem.partition("-")[0]).lower()
            if dist in seen:
                continue
            seen.add(dist)
            try:
                with open(os.path.join(entry or ".", name, "entry_points.txt"), encoding="utf-8") as f:
                    text = f.read()
            except (OSError, UnicodeDecodeError):
                continue
            found.extend(_section(text, group))
    return sorted(found, key=lambda e: e[0])


def _section(text: str, group: str) -> list[tuple[str, str]]:
    """``name = value`` lines under ``[group]`` in an entry_points.txt (an INI file)."""
    out: list[tuple[str, str]] = []
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line[0] == "[" and line[-1] == "]":
            inside = line[1:-1].strip() == group
        elif inside:
            name, eq, value = line.partition("=")
            if eq:
                out.append((name.strip(), value.strip()))
    return out


def _load(value: str) -> object:
    """``module:attr.attr [extra]`` -> the object it names."""
    module, _, attrs = value.partition("[")[0].strip().partition(":")
    obj: object = importlib.import_module(module.strip())
    for attr in filter(None, attrs.strip().split(".")):
        obj = getattr(obj, attr)
    return obj


@cache
def load_dissectors() -> dict[str, Dissector]:
    found: dict[str, Dissector] = {}
    for ep_name, value in declared():
        try:
            cls = _load(value)
            dissector = cls()  # type: ignore[operator]
        except Exception as exc:  # a broken plugin must not take the tool down
            print(f"streamproto: cannot load dissector {ep_name!r}: {exc}", file=sys.stderr)
            continue
        found[dissector.name] = dissector
    for dissector in _builtin_packages(set(found)):
        found.setdefault(dissector.name, dissector)
    return dict(sorted(found.items()))


def _builtin_packages(known: set[str]) -> list[Dissector]:
    """Dissector packages under ``dissectors/`` not (yet) declared as entry points.

    A new protocol then needs nothing but its own folder, also when running from a source tree
    whose installed metadata predates it."""
    try:
        import dissectors
    except ImportError:
        return []
    out: list[Dissector] = []
    for info in pkgutil.iter_modules(dissectors.__path__):
        if not info.ispkg or info.name in known:
            continue
        try:
            module = importlib.import_module(f"dissectors.{info.name}")
        except Exception as exc:
            print(f"streamproto: cannot load dissector package {info.name!r}: {exc}", file=sys.stderr)
            continue
        for obj in vars(module).values():
            if (isinstance(obj, type) and issubclass(obj, Dissector) and obj is not Dissector
                    and obj.__module__.startswith(module.__name__) and getattr(obj, "name", None)
                    and obj.name not in known):
                try:
                    out.append(obj())
                except Exception as exc:
                    print(f"streamproto: cannot load dissector {obj.name!r}: {exc}", file=sys.stderr)
                known.add(obj.name)
    return out


def parse_decode_as(specs: list[str], known: dict[str, Dissector]) -> dict[int, str]:
    """``["15552=rabbitmq_stream"]`` -> ``{15552: "rabbitmq_stream"}``; ValueError with a clear message."""
    out: dict[int, str] = {}
    for spec in specs:
        port_text, sep, name = spec.partition("=")
        if not sep or not port_text.strip().isdigit():
            raise ValueError(f"--decode-as expects PORT=PROTOCOL, got {spec!r}")
        port = int(port_text)
        if not 0 < port < 65536:
            raise ValueError(f"--decode-as: port {port} is out of range")
        name = name.strip()
        if name not in known:
            raise ValueError(f"--decode-as: unknown protocol {name!r} (known: {', '.join(sorted(known)) or 'none'})")
        out[port] = name
    return out


def parse_options(specs: Iterable[str], dialects: Iterable[str], known: dict[str, Dissector]) -> dict[str, Dissector]:
    """Apply ``-o PROTO.NAME=VALUE`` (``:`` also accepted, as in tshark) and ``--dialect PROTO=NAME``
    (short for ``-o PROTO.dialect=NAME``): the dissectors with their options set, or ValueError."""
    chosen: dict[str, dict[str, str]] = {}
    for spec in specs:
        key, value = _split_setting(spec, "-o", "PROTO.NAME=VALUE")
        proto, dot, name = key.partition(".")
        if not dot or not name:
            raise ValueError(f"-o expects PROTO.NAME=VALUE, got {spec!r}")
        chosen.setdefault(proto, {})[name] = value
    for spec in dialects:
        proto, value = _split_setting(spec, "--dialect", "PROTO=DIALECT")
        chosen.setdefault(proto, {})["dialect"] = value
    out = dict(known)
    for proto, values in chosen.items():
        if proto not in known:
            raise ValueError(f"unknown protocol {proto!r} (known: {', '.join(sorted(known)) or 'none'})")
        out[proto] = known[proto].configured(values)
    return out


def _split_setting(spec: str, flag: str, shape: str) -> tuple[str, str]:
    cut = min((i for i in (spec.find("="), spec.find(":")) if i >= 0), default=-1)
    if cut <= 0:
        raise ValueError(f"{flag} expects {shape}, got {spec!r}")
    return spec[:cut].strip(), spec[cut + 1:].strip()
