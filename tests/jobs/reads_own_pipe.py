"""Prints once, then reads a pipe of its own with os.read: a wait dfdoctor has no name for (no thread of the
job could be seen to end it, nor proven unable to): nothing moves, so `unknown`, never `running` (issue 41)."""
import os

print("reading", flush=True)
r, w = os.pipe()
os.read(r, 1)
