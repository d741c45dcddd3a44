"""Deadlocks at import: waits for a lock that its own background thread never releases, after starting a
helper process (which must not outlive the check either)."""
import subprocess
import sys
import threading
import time

_helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", __file__])
_lock = threading.Lock()


def _warm_cache():
    with _lock:
        time.sleep(3600)


threading.Thread(target=_warm_cache, name="cache-warmer", daemon=True).start()
time.sleep(0.1)
with _lock:
    pass
