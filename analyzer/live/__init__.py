"""Live capture: packets from a network interface, decoded as they arrive by the same engine as files.

The pieces: packet sources (:mod:`.sources`: the common interface and a capture file replayed in
real time; :mod:`.scapy_source`: a Linux packet socket through scapy; :mod:`.dumpcap_source`:
Wireshark's dumpcap through pyshark), the loop that feeds them to an :class:`~analyzer.engine.Analyzer`
and fires time-driven findings while no packet arrives (:mod:`.loop`), the pcapng copy of every
packet (:mod:`.tee`) and the closing summary (:mod:`.summary`). No protocol is known here.
"""
