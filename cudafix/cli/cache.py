"""`cudafix cache clear`: remove the caches cudafix keeps outside the env (see cudafix/cli/__init__.py).

What exists (cudafix/store/paths.py, cudafix/activation/runtime.py), all under the user's cache
dir ($XDG_CACHE_HOME/cudafix or ~/.cache/cudafix):
  envs/<key of the env's prefix>/           probe results of `status` and of the startup hook
  activation/<env prefix>.cudafix/          the code conda's activate.d script sources when fresh
Uninstalling cudafix (pip or conda) does not touch them: docs/install.md.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import List, Optional

import click


def _ours(path: str) -> bool:
    """A real directory (not a link) of this user that nobody else can write, reached without a
    link or directory of another user on the way: the only kind removed whole (the one trust
    check, cudafix/store/safefs.py: open_dir walks every component, as the caches are opened)."""
    from cudafix.store import safefs

    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not safefs.trusted(st, os.geteuid(), True):
        return False
    fd = safefs.open_dir(path)
    if fd is None:
        return False
    os.close(fd)
    return True


def clear_env(prefix: str) -> List[str]:
    from cudafix.activation import runtime as activation
    from cudafix.store import paths

    removed: List[str] = []
    d = paths.env_cache_dir(prefix)
    if _ours(d):
        shutil.rmtree(d)
        removed.append(d)
    removed += activation.remove_cache(prefix, os.environ)
    return removed


def clear_all() -> List[str]:
    from cudafix.store import paths

    d = paths.user_cache_dir()
    if _ours(d):
        shutil.rmtree(d)
        return [d]
    return []


@click.group("cache")
def cache_cmd() -> None:
    """Remove cudafix's caches (they are rebuilt when needed)."""


@cache_cmd.command("clear")
@click.option("--prefix", default=None, type=click.Path(file_okay=False),
              help="The env whose caches to remove (default: this Python's sys.prefix).")
@click.option("--all", "everything", is_flag=True,
              help="Remove the caches of every env, including envs that no longer exist.")
def cache_clear(prefix: Optional[str], everything: bool) -> None:
    """Remove cached probe results and activation code (of one env, or --all)."""
    if everything and prefix:
        raise click.UsageError("give --prefix or --all, not both")
    removed = clear_all() if everything else clear_env(os.path.abspath(prefix or sys.prefix))
    for p in removed:
        click.echo("removed    %s" % p)
    if not removed:
        click.echo("nothing to remove")


COMMANDS: list = [cache_cmd]
