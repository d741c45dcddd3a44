"""Opens its own log in a folder nobody created (logging.basicConfig(filename=...)): `log-dir-missing`, blamed on
this file's line, not on logging/__init__.py."""
import logging

print("starting run7", flush=True)
logging.basicConfig(filename="outputs/run7/train.log", level=logging.INFO)
logging.info("never written")
