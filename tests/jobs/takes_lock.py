"""Takes an exclusive flock on the file given; another process holds it: `waiting-on-lock`."""
import fcntl
import sys

print("taking the lock", flush=True)
f = open(sys.argv[1], "w")
fcntl.flock(f, fcntl.LOCK_EX)
print("got it", flush=True)
