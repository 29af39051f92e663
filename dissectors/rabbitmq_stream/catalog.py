"""The field catalogue of the RabbitMQ Stream dissector, generated from the layouts.

Names: the frame header and computed fields every frame can carry are ``rabbitmq_stream.<field>``
(:data:`COMMON`); everything else is ``rabbitmq_stream.<command>.<path>`` with the frame's command
in snake_case (``publish``, ``declare_publisher_response``) and the path of nested names, list
elements adding nothing (``rabbitmq_stream.publish.messages.publishing_id``). Anything inside a
list is ``repeated``. Tables (string-keyed properties, AMQP maps) are one field: their keys are
data, not names. :func:`field_name` maps a frame's field path to its catalogue name.

The layouts of :mod:`.layouts` and :mod:`.draft` are walked (the draft's narrower or signed
integers share today's names and types); the hand-decoded parts (the Osiris chunk, message entries,
AMQP 1.0 sections) are listed here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from dissectors.kit.catalog import Catalog, int_type, snake
from dissectors.rabbitmq_stream import amqp, wire
from dissectors.rabbitmq_stream.draft import DRAFT_COMMANDS, DraftSubscribeStart
from dissectors.rabbitmq_stream.layouts import COMMANDS, DeliverChunk, PublishEntries
from dissectors.schema import Array, Int, Prefixed, Struct, WireType

PROTOCOL = "rabbitmq_stream"
#: Top-level fields any frame can carry, named without the command.
COMMON = {
    "size": ("uint32", "Frame Size (bytes after this field)"),
    "key": ("uint16", "Command key (0x8000 set on responses)"),
    "version": ("uint16", "Command version"),
    "payload": ("bytes", "The body of a frame whose command or version is unknown"),
    "undecoded": ("bytes", "The rest of a frame too short for its command's fields"),
    "trailing": ("bytes", "Bytes left after every field of the command"),
    "response_time": ("double", "Seconds from the request to this response (computed)"),
}


def field_name(command: str, path: Sequence[str]) -> str:
    """The catalogue name of the field at ``path`` (names from the top level down, list elements
    left out) in a frame of ``command``."""
    if len(path) == 1 and path[0] in COMMON:
        return f"{PROTOCOL}.{path[0]}"
    return f"{PROTOCOL}.{snake(command)}.{'.'.join(path)}"


class _Builder:
    def __init__(self) -> None:
        self.cat = Catalog(PROTOCOL)

    def add(self, path: str, type: str, description: str = "", repeated: bool = False) -> None:
        old = self.cat.get(f"{PROTOCOL}.{path}")
        if old is not None and old.repeated == repeated:
            return  # the draft's int32 where today's protocol has a uint8, ...: today's type wins
        self.cat.add(path, type, description, repeated)

    def wire(self, path: str, t: WireType, repeated: bool) -> None:
        if isinstance(t, Int):
            self.add(path, int_type(t._st.format), t.doc, repeated)
        elif isinstance(t, Prefixed):
            self.add(path, "string" if t.text else "bytes", t.doc, repeated)
        elif isinstance(t, wire.Properties):
            self.add(path, "table", f"{{string: {t.value_type.doc}}} pairs, by key", repeated)
        elif isinstance(t, Array):
            if isinstance(t.element, Struct):
                self.add(path, "struct", "", True)
                self.struct(path, t.element, True)
            else:
                self.wire(path, t.element, True)
        elif isinstance(t, Struct):
            self.add(path, "struct", t.doc, repeated)
            self.struct(path, t, repeated)
        elif isinstance(t, wire.OffsetSpec | DraftSubscribeStart):
            self.add(path, "struct", t.doc, repeated)
            if isinstance(t, DraftSubscribeStart):
                self.add(f"{path}.offset", "uint64", "Start offset (first draft)", repeated)
                self.add(f"{path}.credit", "int16", "Initial credit", repeated)
                path = f"{path}.offset_spec"
                self.add(path, "struct", "OffsetSpecification", repeated)
            self.add(f"{path}.type", "uint16", "Offset type", repeated)
            self.add(f"{path}.offset", "uint64", "Offset", repeated)
            self.add(f"{path}.timestamp", "int64", "Timestamp (ms since the epoch)", repeated)
        elif isinstance(t, wire.SaslData):
            self.add(path, "bytes", t.doc, repeated)
        elif isinstance(t, wire.RouteStreams):
            self.add(path, "string", "Streams (a list; RabbitMQ 3.9 sent one string)", True)
        elif isinstance(t, PublishEntries):
            self.add(path, "struct", t.doc, True)
            self.add(f"{path}.publishing_id", "uint64", "Publishing id", True)
            self.add(f"{path}.filter_value", "string", "Filter value (Publish v2)", True)
            self.entry(path, True)
        elif isinstance(t, DeliverChunk):
            self.chunk(path, repeated)
        else:
            raise TypeError(f"{path}: no catalogue type for {type(t).__name__}")

    def struct(self, prefix: str, s: Struct, repeated: bool) -> None:
        for f in s.fields:
            self.wire(f"{prefix}.{f.name}", f.type, repeated)

    def entry(self, path: str, repeated: bool) -> None:
        """A chunk or Publish entry: a message, or a sub-batch of them."""
        self.message(path, repeated)
        self.add(f"{path}.compression", "uint8", "Sub-batch compression codec", repeated)
        self.add(f"{path}.record_count", "uint16", "Records in the sub-batch", repeated)
        self.add(f"{path}.uncompressed_length", "uint32", "Sub-batch length before compression", repeated)
        self.add(f"{path}.data_length", "uint32", "Sub-batch data length", repeated)
        self.add(f"{path}.records", "struct", "The sub-batch's records", True)
        self.message(f"{path}.records", True)
        self.add(f"{path}.records.compressed", "bytes", "A sub-batch that could not be decompressed", True)

    def message(self, path: str, repeated: bool) -> None:
        self.add(f"{path}.offset", "uint64", "Offset of the record in the stream", repeated)
        self.add(f"{path}.length", "uint32", "Message length", repeated)
        self.add(f"{path}.message", "bytes", "A message that is not AMQP 1.0", repeated)
        self.amqp(f"{path}.amqp", repeated)

    def amqp(self, path: str, repeated: bool) -> None:
        self.add(path, "struct", "AMQP 1.0 bare message", repeated)
        types = {"durable": "bool", "priority": "uint8", "ttl": "uint32", "first_acquirer": "bool",
                 "delivery_count": "uint32", "group_sequence": "uint32", "absolute_expiry_time": "timestamp",
                 "creation_time": "timestamp", "user_id": "bytes"}
        for section in ("header", "properties"):
            self.add(f"{path}.{section}", "struct", f"AMQP 1.0 {section} section", repeated)
            for name in (amqp.HEADER_FIELDS if section == "header" else amqp.PROPERTY_FIELDS):
                self.add(f"{path}.{section}.{name}", types.get(name, "string"), f"{section} field {name}", repeated)
        for section in ("delivery_annotations", "message_annotations", "application_properties", "footer"):
            self.add(f"{path}.{section}", "table", f"AMQP 1.0 {section} section (a map)", repeated)
        self.add(f"{path}.data", "bytes", "AMQP 1.0 data sections (one or more)", True)
        self.add(f"{path}.amqp_sequence", "string", "AMQP 1.0 amqp-sequence sections (one or more; values of "
                                                    "any AMQP type)", True)
        self.add(f"{path}.amqp_value", "string", "AMQP 1.0 amqp-value section (a value of any AMQP type)", repeated)

    def chunk(self, path: str, repeated: bool) -> None:
        self.add(path, "struct", "Osiris chunk (value: its first offset)", repeated)
        for name, typ, doc in (
                ("magic_version", "uint8", "Magic (high nibble) and version"), ("chunk_type", "uint8", "Chunk type"),
                ("num_entries", "uint16", "Entries"), ("num_records", "uint32", "Records"),
                ("timestamp", "timestamp", "Chunk timestamp (ms since the epoch)"), ("epoch", "uint64", "Epoch"),
                ("chunk_first_offset", "uint64", "Offset of the first record"), ("crc", "uint32", "CRC-32 of the data"),
                ("data_length", "uint32", "Data length"), ("trailer_length", "uint32", "Trailer length"),
                ("bloom_size", "uint8", "Bloom filter size"), ("reserved", "uint32", "Reserved (3 bytes)"),
                ("trailer", "bytes", "Trailer"), ("chunk_bytes", "bytes", "A chunk too short for its header")):
            self.add(f"{path}.{name}", typ, doc, repeated)
        self.add(f"{path}.entries", "struct", "The chunk's entries", True)
        self.entry(f"{path}.entries", True)


def _commands() -> Iterable[tuple[str, Struct]]:
    for table in (COMMANDS, DRAFT_COMMANDS):
        for cmd in table.values():
            for layout in cmd.requests.values():
                yield cmd.name, layout
            if cmd.response is not None:
                yield cmd.name + "Response", cmd.response


def build() -> Catalog:
    b = _Builder()
    for name, (typ, doc) in COMMON.items():
        b.add(name, typ, doc)
    for command, layout in _commands():
        b.struct(snake(command), layout, False)
    return b.cat


CATALOG = build()
