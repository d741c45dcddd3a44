"""Reads its rank at module level: fine under torchrun, a KeyError when started with plain python."""
import os

LOCAL_RANK = int(os.environ["LOCAL_RANK"])

import json  # noqa: E402
