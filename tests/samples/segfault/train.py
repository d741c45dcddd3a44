import os

import fastkernels
