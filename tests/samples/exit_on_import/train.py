import os

import setup_env
