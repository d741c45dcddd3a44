import os

import drafter

if __name__ == "__main__":
    drafter.run()
