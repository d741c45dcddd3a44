import os

try:
    import deepspeed_not_installed_here as deepspeed
except ImportError:
    deepspeed = None

if os.environ.get("USE_APEX_NOT_SET"):
    import apex_not_installed_here  # noqa: F401
