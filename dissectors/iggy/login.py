"""The login state machine as a transition table (:class:`~dissectors.kit.Machine`).

Only PING and the login commands (LOGIN_USER, LOGIN_WITH_PERSONAL_ACCESS_TOKEN, and in V
LOGIN_REGISTER / LOGIN_REGISTER_WITH_PAT) may come before a successful login; the server answers
anything else with Unauthenticated (40). Events are ``PING``, ``LOGIN`` and ``LOGOUT`` from the
client, ``COMMAND`` for every other request, and ``LOGIN_OK`` / ``LOGIN_FAILED`` for the server's
answer to a login. The server handles a connection's requests in order, so a request sent after a
login but before its answer is judged once that answer is known to be possible (``logging_in``).
"""

from __future__ import annotations

from dissectors.iggy import rules as R
from dissectors.kit import Machine

C, S = "c2s", "s2c"

_ROWS = {
    ("anonymous", C, "PING"): "anonymous",
    ("anonymous", C, "LOGIN"): "logging_in",
    ("logging_in", C, "PING"): "logging_in",
    ("logging_in", C, "LOGIN"): "logging_in",
    ("logging_in", C, "COMMAND"): "logging_in",  # pipelined behind the login: cannot be judged yet
    ("logging_in", C, "LOGOUT"): "anonymous",
    ("logging_in", S, "LOGIN_OK"): "authenticated",
    ("logging_in", S, "LOGIN_FAILED"): "anonymous",
    ("authenticated", C, "PING"): "authenticated",
    ("authenticated", C, "LOGIN"): "authenticated",
    ("authenticated", C, "COMMAND"): "authenticated",
    ("authenticated", C, "LOGOUT"): "anonymous",
    ("authenticated", S, "LOGIN_OK"): "authenticated",
    ("authenticated", S, "LOGIN_FAILED"): "authenticated",
    ("anonymous", S, "LOGIN_OK"): "authenticated",  # the answer to a login pipelined before a logout
    ("anonymous", S, "LOGIN_FAILED"): "anonymous",
}

MACHINE = Machine(
    "login", "anonymous", _ROWS, R.BEFORE_LOGIN,
    labels={"anonymous": "not logged in", "logging_in": "login sent", "authenticated": "logged in"},
    # A command before login stays unauthenticated; so does LOGOUT without a session.
    recover={("anonymous", C, "COMMAND"): "anonymous", ("anonymous", C, "LOGOUT"): "anonymous"},
)
