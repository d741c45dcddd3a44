"""Downloads from a server that accepted the connection and never answers (a hung mirror)."""
import socket
import sys

print("fetching the tokenizer", flush=True)
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /tokenizer.json HTTP/1.0\r\n\r\n")
data = s.recv(65536)
print(len(data))
