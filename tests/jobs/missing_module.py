"""Imports a module that is not installed: `missing-module`."""
import os

import dfdoctor_no_such_module_xyz  # noqa: F401

print("never reached")
