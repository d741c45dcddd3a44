"""Logs, then dereferences NULL: dies from SIGSEGV: `crashed`."""
import ctypes

print("step 0", flush=True)
ctypes.string_at(0)
