import os

import loader
