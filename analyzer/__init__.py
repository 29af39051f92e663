"""streamproto: protocol analyzer for message-streaming protocols."""

from analyzer import native

native.install()  # before any compiled module is imported: STREAMPROTO_PURE=1 keeps them all out
