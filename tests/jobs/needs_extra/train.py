"""Starts its training through a framework's CLI (framework.py here, LightningCLI in the wild), whose optional
dependency is missing: `dependency-missing`, with the install line the framework's message gives."""
from framework import CLI


def cli_main():
    CLI(model="demo")


if __name__ == "__main__":
    cli_main()
