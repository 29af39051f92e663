"""streamproto: protocol analyzer for message-streaming protocols."""
