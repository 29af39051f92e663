"""The dissector kit: what every dissector builds on, so each mechanism exists once.

- :mod:`.framing`: cutting a length-prefixed byte stream into frames, resync, incomplete at end.
- :mod:`.correlate`: pairing requests and responses by id or in order, unanswered at end.
- :mod:`.timers`: heartbeat silence, driven by capture time (``Connection.tick``).
- :mod:`.sequence`: content split over several frames.
- :mod:`.machine`: state machines as transition tables.
- :mod:`.dialect`: protocol variants as objects.
- :mod:`.rules`: rule families shared across protocols.
- :mod:`.catalog`: the field catalogue (dotted names, types, descriptions).
- :mod:`.state`: connection state as plain data, for snapshot and resume.
- :mod:`.lazy`: frames whose field tree is built when first read (hot paths check without it).
- :mod:`.script`: driving a connection with a script of (direction, bytes, ts) steps (encoders, tests).
"""

from dissectors.kit.correlate import Correlator
from dissectors.kit.dialect import Dialect
from dissectors.kit.framing import ByteQueue, Framer, Piece
from dissectors.kit.machine import ANY, Machine
from dissectors.kit.rules import Family, RuleSet
from dissectors.kit.script import play
from dissectors.kit.sequence import Sequencer
from dissectors.kit.state import decode, encode, plain_state, resume, snapshot
from dissectors.kit.timers import Silence

__all__ = ["ANY", "ByteQueue", "Correlator", "Dialect", "Family", "Framer", "Machine", "Piece", "RuleSet",
           "Sequencer", "Silence", "decode", "encode", "plain_state", "play", "resume", "snapshot"]
