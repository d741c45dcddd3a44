#!/bin/sh
# A launcher that fetches its data before it starts the trainer, from a server that accepts and never answers:
# the whole watch is spent in a quiet wget (not Python) reading a socket. $1: the port on 127.0.0.1.
wget -q -T 600 -O /dev/null "http://127.0.0.1:$1/data.tar"
exec python3 -u -c "print('training')"
