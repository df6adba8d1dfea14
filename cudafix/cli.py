"""The `cudafix` command line (click, thin: logic lives in the modules it calls).

Commands are defined per area so that each area owns its file:
  cudafix/cli_report.py  status (default), check, snapshot, explain
  cudafix/cli_shell.py   shell, hooks
  cudafix/cli_verify.py  verify
"""

from __future__ import annotations

import click

from cudafix import __version__


class _DefaultGroup(click.Group):
    """`cudafix` with no subcommand runs `cudafix status`."""

    def parse_args(self, ctx: click.Context, args: list) -> list:
        if not args or (args[0].startswith("-") and args[0] not in ("--help", "-h", "--version")):
            args = ["status"] + list(args)
        return super().parse_args(ctx, args)


@click.group(cls=_DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cudafix")
def main() -> None:
    """cudafix: the CUDA stack under PyTorch, checked and corrected before torch loads."""


def _register() -> None:
    from cudafix import cli_report, cli_shell, cli_verify

    for mod in (cli_report, cli_shell, cli_verify):
        for cmd in mod.COMMANDS:
            main.add_command(cmd)


_register()
