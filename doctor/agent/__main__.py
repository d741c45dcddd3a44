"""The agent's one loader: runs a part of dfdoctor's agent in a python that has no dfdoctor installed.

  python AGENT PART ARG...              AGENT: this package's folder, or its zip (`ship.bundle`)
  python -S -c "<this file>" PART ARG... the zip's files are the first line of stdin (`ship.stdin_line`)

PART is one of PARTS; it runs with `sys.argv` = [PART, ARG...]. Bytecode is never written (the folder may be
dfdoctor's own install). Python 2 syntax up to the version check, so an interpreter too old says so in the
words dfdoctor looks for (TOO_OLD) instead of a SyntaxError.
"""

import os
import sys

# What an interpreter older than the agent's floor says instead of running a part (probe.py looks for it).
TOO_OLD = "dfdoctor: this python is older than 3.6, which dfdoctor's probes need: Python "
PARTS = {"recorder": "dfdoctor.agent.recorder", "target-agent": "dfdoctor.agent.target_agent",
         "probe": "dfdoctor.agent.probe_bootstrap", "relay": "dfdoctor.agent.relay",
         "relay-here": "dfdoctor.agent.relay_here",
         "slurm-job": "dfdoctor.agent.slurm_job", "stop": "dfdoctor.agent.stop"}


class MemoryFinder(object):
    """Imports the modules of the agent that came on stdin: the files of its zip, {name: bytes}."""

    def __init__(self, files):
        self.files = files
        self.names = set(files)

    def find_spec(self, fullname, path=None, target=None):
        import importlib.machinery

        base = fullname.replace(".", "/")
        for name, package in ((base + "/__init__.py", True), (base + ".py", False)):
            if name in self.names:  # what importlib.util.spec_from_loader makes of a loader without get_filename
                return importlib.machinery.ModuleSpec(fullname, self, origin=name, is_package=package)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        exec(self.code(module.__spec__.origin), module.__dict__)

    def code(self, name):
        """The module's bytecode where the zip has it for this python (`ship.bytecode`: its magic number), else
        its source compiled."""
        from importlib._bootstrap_external import MAGIC_NUMBER  # importlib.util's, without what util imports

        if name + "c" in self.names:
            data = self.files[name + "c"]
            if data[:4] == MAGIC_NUMBER:
                import marshal

                return marshal.loads(data[16:])
        return compile(self.files[name].decode("utf-8"), "<dfdoctor agent>/" + name, "exec")


def install(main_file):
    """Make `dfdoctor.agent` importable from wherever this loader came (folder, zip file, or stdin)."""
    # importlib's machinery (and with it importlib._bootstrap_external), loaded before a MemoryFinder is in place:
    # that finder's own imports must not come to it. Not importlib.util (contextlib, functools and more: 18 M
    # instructions alone, a bare `python3 -S` is 21 M), which a folder's loading below needs alone.
    import importlib.machinery

    if main_file is None:  # python -c: the agent's files are the first line of stdin (ship.stdin_line)
        import binascii
        import marshal
        import zlib

        # marshal and zlib, not zipfile: zipfile and what it imports were a tenth of each part's start. binascii,
        # not base64 (re, struct): the same decoding of a line, newline ignored
        files = marshal.loads(zlib.decompress(binascii.a2b_base64(sys.stdin.readline())))
        sys.meta_path.insert(0, MemoryFinder(files))
        return
    folder = os.path.dirname(os.path.abspath(main_file))
    if os.path.isfile(folder):  # a zip: its root (dfdoctor/agent/...) is sys.path[0] already
        return
    # this package's folder: it leaves sys.path (its modules are no top-level names), and is loaded as
    # dfdoctor.agent under a bare `dfdoctor` (the real one, if this python has it, is not ours to import)
    if sys.path and os.path.abspath(sys.path[0] or ".") == folder:
        sys.path.pop(0)
    import importlib.util
    import types

    top = types.ModuleType("dfdoctor")
    top.__path__ = []
    sys.modules["dfdoctor"] = top
    spec = importlib.util.spec_from_file_location("dfdoctor.agent", os.path.join(folder, "__init__.py"),
                                                  submodule_search_locations=[folder])
    module = importlib.util.module_from_spec(spec)
    sys.modules["dfdoctor.agent"] = module
    spec.loader.exec_module(module)


def main():
    if sys.version_info < (3, 6):
        sys.stderr.write(TOO_OLD + sys.version.split()[0] + "\n")
        return 1
    if len(sys.argv) < 2 or sys.argv[1] not in PARTS:
        sys.stderr.write("usage: python AGENT {%s} ARG...\n" % "|".join(sorted(PARTS)))
        return 2
    sys.dont_write_bytecode = True
    install(globals().get("__file__"))
    import importlib

    part = importlib.import_module(PARTS[sys.argv[1]])
    sys.argv = sys.argv[1:]
    return part.main(sys.argv)


if __name__ == "__main__":
    sys.exit(main())
