"""Rehearse the user's exact launch line with the training program swapped for a sentinel (REHEARSAL.md)."""
