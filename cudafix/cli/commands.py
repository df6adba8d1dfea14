"""The command table and the default command, read by the click group (cudafix/cli/group.py) and
the click-free path (cudafix/cli/fast.py) alike; re-exported by cudafix/cli/__init__.py."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Sequence

# command name -> module whose COMMANDS list defines it (in `--help` order: sorted anyway)
COMMAND_MODULES: Dict[str, str] = {
    "status": "cudafix.cli.report",
    "check": "cudafix.cli.report",
    "snapshot": "cudafix.cli.report",
    "explain": "cudafix.cli.report",
    "shell": "cudafix.cli.shell",
    "hooks": "cudafix.cli.shell",
    "verify": "cudafix.cli.verify",
    "fleet": "cudafix.cli.fleet",
    "fix": "cudafix.cli.fix",
    "warm": "cudafix.cli.warm",
    "cache": "cudafix.cli.cache",
}


def with_default_command(args: Sequence[str]) -> List[str]:
    """``args`` with the group's default command put first: no command, or an option first
    (other than the group's own --help / -h / --version), means `status`.  The click group
    (cudafix/cli/group.py) and the click-free path (cudafix/cli/fast.py) both read it so."""
    args = list(args)
    if not args or (args[0].startswith("-") and args[0] not in ("--help", "-h", "--version")):
        return ["status"] + args
    return args
