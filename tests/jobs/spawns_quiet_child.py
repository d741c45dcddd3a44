"""A Python job whose setup runs a quiet child that is not Python (as a job that fetches its data with a tool)."""
import subprocess


def setup():
    subprocess.run(["sleep", "600"])  # line 6: the child that the silence is in


setup()
