"""A module whose import takes SLOW_IMPORT_S seconds (12 by default), as `import torch` does on a loaded machine."""
import os
import time

time.sleep(float(os.environ.get("SLOW_IMPORT_S", "12")))
