"""The only import that matters sits under the main guard."""
import os

if __name__ == "__main__":
    import drafter_kernels_not_installed_here
