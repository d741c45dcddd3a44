"""`python as_module.py MODULE ARGS...` runs MODULE as `python -m MODULE ARGS...` does (tests/support/torch_forks.py:
its server runs script files, not modules): sys.path[0] is the working folder, sys.argv[0] the module's file."""

import os
import runpy
import sys

sys.argv = sys.argv[1:]
sys.path[0] = os.getcwd()
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
