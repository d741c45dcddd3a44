"""Downloads from http://127.0.0.1:PORT/ (argv[1]) without printing: the server trickles the bytes in, so the
download makes progress the whole time (a healthy slow data download: `running`)."""
import sys
import urllib.request

print("fetching the data set", flush=True)
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/data", timeout=600) as r:
    got = 0
    while True:
        chunk = r.read(16)
        if not chunk:
            break
        got += len(chunk)
print("downloaded", got, "bytes", flush=True)
