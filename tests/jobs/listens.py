"""Serves on a port and waits for a client that never comes (a rank 0 whose peers were never started)."""
import socket

server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(1)
print("listening on port", server.getsockname()[1], flush=True)
conn, addr = server.accept()
print("client", addr)
