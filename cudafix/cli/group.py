"""The click group behind `cudafix` (``cudafix.cli.main``): commands load on demand.

Kept apart from cudafix/cli/__init__.py so that importing a click-free module of the cli area
(cudafix/cli/fast.py: `status` and `check` without click) does not import click.
"""

from __future__ import annotations

import importlib
from typing import Dict, Iterator, MutableMapping, Optional

import click

from cudafix import __version__
from cudafix.cli.commands import COMMAND_MODULES, with_default_command


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
        return super().parse_args(ctx, with_default_command(args))


@click.group(cls=_DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cudafix")
def main() -> None:
    """cudafix: the CUDA stack under PyTorch, checked and corrected before torch loads."""
