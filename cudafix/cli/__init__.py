"""The `cudafix` command line (click, thin: logic lives in the modules it calls).

Commands are defined per area so that each area owns its file:
  cudafix/cli/report.py  status (default), check, snapshot, explain
  cudafix/cli/shell.py   shell, hooks
  cudafix/cli/verify.py  verify
  cudafix/cli/fix.py     fix
  cudafix/cli/warm.py    warm
  cudafix/cli/fleet.py   fleet
  cudafix/cli/cache.py   cache clear

A command's module is imported only when that command is looked up (``cudafix status`` never
imports the shell or verify areas); the table below names every command without importing
anything, so ``cudafix --help`` still lists them all.  tests/test_perf_caches.py checks that
the table and the modules' ``COMMANDS`` lists agree.
"""

from __future__ import annotations

import importlib
from typing import Dict, Iterator, MutableMapping, Optional

import click

from cudafix import __version__

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


class _LazyCommands(MutableMapping):  # type: ignore[type-arg]
    """``Group.commands`` that imports a command's module on first lookup of its name.

    Iteration and ``len`` use the static table (no import); ``commands[name]`` / ``.get`` /
    ``.items()`` import what they return.  A failing import propagates: a broken module is
    an error to see, not a silently missing command.
    """

    def __init__(self, table: Dict[str, Optional[str]]) -> None:
        self._table = dict(table)  # name -> module (None: added directly)
        self._loaded: Dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        cmd = self._loaded.get(name)
        if cmd is not None:
            return cmd
        modname = self._table[name]  # KeyError: no such command
        if modname is None:
            raise KeyError(name)
        mod = importlib.import_module(modname)
        for c in getattr(mod, "COMMANDS", ()):
            if c.name:
                self._loaded.setdefault(c.name, c)  # a command added directly wins
        return self._loaded[name]

    def __setitem__(self, name: str, cmd: click.Command) -> None:
        self._loaded[name] = cmd
        self._table.setdefault(name, None)

    def __delitem__(self, name: str) -> None:
        del self._table[name]
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._table))

    def __len__(self) -> int:
        return len(self._table)

    def __contains__(self, name: object) -> bool:
        return name in self._table


class _DefaultGroup(click.Group):
    """`cudafix` with no subcommand runs `cudafix status`; commands load on demand."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.commands = _LazyCommands(COMMAND_MODULES)

    def list_commands(self, ctx: click.Context) -> list:
        return sorted(self.commands)  # static: no import

    def get_command(self, ctx: click.Context, cmd_name: str) -> Optional[click.Command]:
        return self.commands.get(cmd_name)

    def parse_args(self, ctx: click.Context, args: list) -> list:
        if not args or (args[0].startswith("-") and args[0] not in ("--help", "-h", "--version")):
            args = ["status"] + list(args)
        return super().parse_args(ctx, args)


@click.group(cls=_DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cudafix")
def main() -> None:
    """cudafix: the CUDA stack under PyTorch, checked and corrected before torch loads."""
