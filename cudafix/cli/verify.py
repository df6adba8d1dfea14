"""`cudafix verify`: is the GPU really used?  See cudafix/verify/__init__.py for the verdicts and exit codes."""

from __future__ import annotations

import json
import sys
from typing import Optional

import click

from cudafix import verify as _verify


@click.command("verify")
@click.option("--python", "python", default=None, metavar="PATH",
              help="Interpreter of the env to check (default: this one).")
@click.option("--quick", is_flag=True, help="Small sizes: finishes in well under 10 s on a healthy GPU.")
@click.option("--json", "as_json", is_flag=True, help="Print the measurements and verdict as JSON.")
@click.option("--timeout", default=600, show_default=True, help="Seconds before the check is abandoned.")
def verify_cmd(python: Optional[str], quick: bool, as_json: bool, timeout: int) -> None:
    """Import torch in a child process and measure whether the GPU is really used.

    Exit codes: 0 GPU used, 1 degraded, 2 cudafix could not run, 3 CPU fallback, 4 no torch.
    """
    try:
        result = _verify.verify(python=python, quick=quick, timeout=float(timeout))
    except _verify.VerifyError as exc:
        click.echo("cudafix verify: %s" % exc, err=True)
        sys.exit(2)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
    else:
        click.echo(_verify.render_text(result))
    sys.exit(result.exit_code)


COMMANDS = [verify_cmd]
