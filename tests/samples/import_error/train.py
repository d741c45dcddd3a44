import os

import config
