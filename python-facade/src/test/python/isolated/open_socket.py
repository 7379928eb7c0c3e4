"""Run by IsolatedRunTest under `dtorch run --isolated`: a socket is refused, and the script stops."""

import socket

socket.create_connection(("127.0.0.1", 9), timeout=5)
print("isolated: a socket was opened")
