"""An ssh ProxyCommand for a slow login: waits SECONDS, then relays stdin/stdout to HOST:PORT.

Usage: python3 slow_proxy.py SECONDS HOST PORT. A loaded machine or a far host makes ssh take seconds before
the remote shell runs; this makes that delay exact."""

import os
import selectors
import socket
import sys
import time

seconds, host, port = float(sys.argv[1]), sys.argv[2], int(sys.argv[3])
time.sleep(seconds)
conn = socket.create_connection((host, port))
sel = selectors.DefaultSelector()
sel.register(0, selectors.EVENT_READ)
sel.register(conn, selectors.EVENT_READ)
while sel.get_map():
    for key, _ in sel.select():
        if key.fileobj == 0:
            data = os.read(0, 65536)
            if not data:
                conn.shutdown(socket.SHUT_WR)
                sel.unregister(0)
                continue
            conn.sendall(data)
        else:
            data = conn.recv(65536)
            if not data:
                sys.exit(0)
            os.write(1, data)
