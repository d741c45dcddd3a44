"""The command line: click commands that parse options, call the engine or the launch pipeline, and print."""
