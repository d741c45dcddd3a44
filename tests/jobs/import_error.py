"""Imports a local module that raises at import, before anything is written: `import-error`."""
import badlib  # noqa: F401

print("never reached")
