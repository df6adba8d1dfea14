"""Commands of this area; see cudafix/cli.py."""

COMMANDS: list = []
