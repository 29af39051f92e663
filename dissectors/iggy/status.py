"""Iggy status codes (iggy.md section 6) by name, and which of them point at a client mistake.

A response's ``status`` is 0 for OK and an IggyError code otherwise. Names are the spec's
CamelCase in UPPER_SNAKE (``STREAM_ID_NOT_FOUND``), as the Info line shows them. Codes below 100
and in the 5000s moved between versions; the names here are those of server 0.8.0 (the current
stable release), with the edge (V) additions.
"""

from __future__ import annotations

import re

_NAMES = {
    1: "Error", 2: "InvalidConfiguration", 3: "InvalidCommand", 4: "InvalidFormat", 5: "FeatureUnavailable",
    6: "InvalidIdentifier", 7: "InvalidVersion", 8: "Disconnected", 20: "ResourceNotFound", 30: "StaleClient",
    31: "TcpError", 40: "Unauthenticated", 41: "Unauthorized", 42: "InvalidCredentials", 43: "InvalidUsername",
    44: "InvalidPassword", 45: "InvalidUserStatus", 46: "UserAlreadyExists", 47: "UserInactive",
    48: "CannotDeleteUser", 49: "CannotChangePermissions", 50: "InvalidPersonalAccessTokenName",
    51: "PersonalAccessTokenAlreadyExists", 52: "PersonalAccessTokensLimitReached",
    53: "InvalidPersonalAccessToken", 54: "PersonalAccessTokenExpired", 55: "UsersLimitReached",
    56: "InvalidPersonalAccessTokenExpiry", 57: "TransientNotCommitted", 58: "TransientNotAccepted",
    59: "RequestAlreadyApplied", 61: "NotConnected", 80: "InvalidSizeBytes", 82: "InvalidNumberEncoding",
    100: "ClientNotFound", 101: "InvalidClientId", 206: "ConnectionClosed", 209: "CannotParseHeaderKind",
    1009: "StreamIdNotFound", 1010: "StreamNameNotFound", 1012: "StreamNameAlreadyExists", 1013: "InvalidStreamName",
    1014: "InvalidStreamId", 1019: "InvalidTopicSize", 1020: "TooManyStreams", 2010: "TopicIdNotFound",
    2011: "TopicNameNotFound", 2013: "TopicNameAlreadyExists", 2014: "InvalidTopicName", 2015: "TooManyPartitions",
    2016: "InvalidTopicId", 2018: "InvalidReplicationFactor", 2019: "InvalidPartitionsCount", 2021: "TooManyTopics",
    3007: "PartitionNotFound", 3008: "NoPartitions", 3009: "TopicFull", 3013: "PartitionIdSpaceExhausted",
    3021: "ConsumerOffsetNotFound", 4000: "SegmentNotFound", 4009: "InvalidMessagesCount",
    4017: "TooBigUserHeaders", 4018: "InvalidHeaderKey", 4019: "InvalidHeaderValue", 4022: "TooBigMessagePayload",
    4023: "TooManyMessages", 4024: "EmptyMessagePayload", 4025: "InvalidMessagePayloadLength",
    4027: "InvalidMessageChecksum", 4028: "InvalidKeyValueLength", 4029: "CommandLengthError",
    4031: "NonZeroOffset", 4032: "NonZeroTimestamp", 4033: "MissingIndex", 4034: "InvalidIndexesByteSize",
    4035: "InvalidIndexesCount", 4036: "InvalidMessagesSize", 4037: "TooSmallMessage", 4040: "InvalidHeaderKind",
    4100: "InvalidOffset", 4101: "InvalidReservedField", 5000: "ConsumerGroupIdNotFound",
    5002: "InvalidConsumerGroupId", 5003: "ConsumerGroupNameNotFound", 5004: "ConsumerGroupNameAlreadyExists",
    5005: "InvalidConsumerGroupName", 5006: "ConsumerGroupMemberNotFound", 5009: "ConsumerGroupPartitionNotOwned",
    8000: "InvalidConnectionString", 11000: "ShardNotFound", 12000: "CannotBindToSocket", 13000: "IoError",
    14000: "AlreadyAuthenticated", 14001: "InvalidSession", 14003: "IncompatibleProtocolVersion",
}


def _upper_snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()


#: status code -> UPPER_SNAKE name.
STATUS: dict[int, str] = {code: _upper_snake(name) for code, name in _NAMES.items()}
OK = 0
#: The one status a server sends with no request outstanding (section 1.2: shutdown).
UNSOLICITED = 8

#: Ranges of server 0.8.0 codes that exist but that the spec does not name (section 6).
_RANGES = ((10, 16), (19, 19), (21, 21), (32, 36), (63, 79), (83, 84), (300, 306), (400, 404), (1000, 1008),
           (1011, 1011), (1015, 1015), (2000, 2009), (2017, 2017), (2020, 2020), (3000, 3006), (3010, 3023),
           (4001, 4016), (4020, 4021), (4026, 4026), (4030, 4030), (4038, 4043), (4050, 4057), (5007, 5008),
           (6000, 6004), (7000, 7004), (9000, 9000), (10000, 10013), (11001, 11001), (12001, 12001))

# What the client got wrong (a malformed or unauthorised request), as opposed to outcomes a correct
# client meets in normal operation (a name already taken, an entity not found, a feature the server
# has switched off, a wrong password typed by a user). Told apart by name, so that the rule follows
# the table: every Invalid*/TooBig*/TooMany*/NonZero*/Missing*/Empty* code, plus these.
_MISTAKE_PREFIXES = ("INVALID_", "TOO_BIG_", "TOO_MANY_", "TOO_SMALL_", "NON_ZERO_", "MISSING_", "EMPTY_",
                     "CANNOT_PARSE_")
_MISTAKES_BY_NAME = {"INVALID_COMMAND", "UNAUTHENTICATED", "UNAUTHORIZED", "COMMAND_LENGTH_ERROR",
                     "ALREADY_AUTHENTICATED", "INCOMPATIBLE_PROTOCOL_VERSION"}
#: Refusals a correct client meets, although their names look like mistakes.
_OUTCOMES = {"INVALID_CREDENTIALS", "INVALID_PERSONAL_ACCESS_TOKEN", "INVALID_SESSION"}
CLIENT_MISTAKES: frozenset[int] = frozenset(
    code for code, name in STATUS.items()
    if name not in _OUTCOMES and (name in _MISTAKES_BY_NAME or name.startswith(_MISTAKE_PREFIXES)))


def known(code: int) -> bool:
    """Whether ``code`` is a status some server version defines."""
    return code == OK or code in STATUS or any(lo <= code <= hi for lo, hi in _RANGES)


def status_name(code: int) -> str:
    """``OK``, the name, or ``UNKNOWN`` for a code without one."""
    if code == OK:
        return "OK"
    return STATUS.get(code, "UNKNOWN")


def status_text(code: int) -> str:
    """As the Info line shows it: ``OK`` or ``1009 STREAM_ID_NOT_FOUND``."""
    return "OK" if code == OK else f"{code} {status_name(code)}"
