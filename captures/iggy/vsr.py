"""Dialect V transport for the capture responder: the 256-byte consensus header (iggy.md §9).

Client frames are Requests (command 5); the responder answers each with one Reply (command 8) that
carries the request number, the operation and the status (§9.3). Reads and other non-replicated
commands (operation 2) name the classic command code at bytes 196..200 and reuse the classic
handlers; replicated operations (§9.2 table) map back to their classic codes here.
"""

from __future__ import annotations

import asyncio
import struct

from broker import Session
from wire import INVALID_COMMAND, u32, u128

HEADER = 256
REQUEST, REPLY, EVICTION = 5, 8, 13
OP_REGISTER, OP_NON_REPLICATED, OP_LOGOUT = 1, 2, 3

# §9.2 operations of replicated (metadata and partition) requests -> the classic command code.
OPERATION_CODES = {
    OP_REGISTER: 40, OP_LOGOUT: 39,
    128: 202, 129: 204, 130: 203, 131: 205, 132: 302, 133: 304, 134: 303, 135: 305,
    136: 402, 137: 403, 138: 503, 139: 602, 140: 603,
    141: 33, 142: 35, 143: 34, 144: 37, 145: 36, 146: 42, 147: 43, 148: 604, 149: 605,
    160: 101, 161: 121, 162: 122,
}
# Operations whose reply body starts with the result section (§9.3): metadata operations, Register,
# and (not in the spec) Store/DeleteConsumerOffset, whose empty reply the 0.9.0 client refuses as
# InvalidCommand. SendMessages (160) answers with a bare SendMessagesResponse.
RESULT_SECTION = {op for op in OPERATION_CODES if 128 <= op < 160} | {OP_REGISTER, 161, 162}


def parse_request(head: bytes) -> dict:
    """The fields of a Request header (§9.2) the responder needs and logs."""
    client = int.from_bytes(head[128:144], "little")
    timestamp, request = struct.unpack_from("<QQ", head, 160)
    operation = head[176]
    session, user_id, code = struct.unpack_from("<QII", head, 184)
    return {"client": client, "request_checksum": int.from_bytes(head[144:160], "little"),
            "timestamp": timestamp, "request": request, "operation": operation,
            "session": session, "user_id": user_id, "code_field": code,
            "release": struct.unpack_from("<I", head, 56)[0], "view": struct.unpack_from("<I", head, 52)[0]}


def build_reply(req: dict, op_number: int, status: int, body: bytes) -> bytes:
    """A Reply header (§9.3) followed by ``body``."""
    h = bytearray(HEADER)
    struct.pack_into("<I", h, 48, HEADER + len(body))  # size covers header and body
    struct.pack_into("<I", h, 52, req["view"])
    struct.pack_into("<I", h, 56, req["release"])
    h[60] = REPLY
    # The request's own checksum field (apache-iggy 0.9.0 fills it with XXH3-64 of the body on
    # Register and metadata operations), echoed so a reader can match the reply to the request.
    h[128:144] = u128(req["request_checksum"])
    h[160:176] = u128(req["client"])
    struct.pack_into("<QQQQ", h, 176, op_number, op_number, req["timestamp"], req["request"])
    h[208] = req["operation"]
    struct.pack_into("<I", h, 216, status)
    return bytes(h) + body


async def serve_vsr(responder, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    s: Session = responder.new_session(writer)
    op_number = 0
    seq = 0
    try:
        while True:
            head = await reader.readexactly(HEADER)
            size = struct.unpack_from("<I", head, 48)[0]
            body = await reader.readexactly(size - HEADER) if size > HEADER else b""
            command = head[60]
            if command != REQUEST:
                responder.log.write({"conn": s.client_id, "event": "unexpected_command", "command": command,
                                     "head_hex": head.hex()})
                continue
            req = parse_request(head)
            op = req["operation"]
            code = req["code_field"] if op == OP_NON_REPLICATED else OPERATION_CODES.get(op, 0)
            if code == 40:
                status, payload = responder.broker.login_register(s, body)
            elif code:
                status, payload = responder.broker.handle(s, code, body)
            else:
                status, payload = INVALID_COMMAND, b""
            if op != OP_NON_REPLICATED:
                op_number += 1
            if status == 0 and op in RESULT_SECTION:
                # Result section, even before an empty payload (the 0.9.0 client calls a reply
                # without one an invalid command): count 0, then the typed payload.
                payload = u32(0) + payload
            writer.write(build_reply(req, op_number, status, payload))
            await writer.drain()
            seq += 1
            responder.log.write({"conn": s.client_id, "seq": seq, "code": code, "status": status,
                                 "request_len": size, "response_len": HEADER + len(payload),
                                 "vsr": {k: req[k] for k in ("request", "operation", "session", "user_id",
                                                             "code_field", "request_checksum")},
                                 **({"body_hex": body[:160].hex()} if code not in (101,) else {}),
                                 **s.note})
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        responder.close(s, writer)
