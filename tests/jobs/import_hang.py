"""Hangs while importing a local module, before it writes anything: `import-hang`."""
import hanglib  # noqa: F401

print("never reached")
