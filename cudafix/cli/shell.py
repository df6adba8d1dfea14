"""`cudafix shell` and `cudafix hooks`: commands of the activation area; see cudafix/cli/__init__.py.

  cudafix shell --shell bash --activate     code for eval: apply the safe corrections
  cudafix shell --shell fish --deactivate   code for eval: restore what activation changed
  cudafix hooks install|uninstall|status [--prefix P]
                                            the startup hook (.pth/.start in site-packages)
                                            and conda's activate.d/deactivate.d scripts
  cudafix hooks uninstall --shell bash      ... and code for eval that undoes the corrections
"""

from __future__ import annotations

import glob
import os
import sys
import sysconfig
from typing import List, Optional, Tuple

import click

from cudafix.activation import shells

SHELL_CHOICES = ("sh", "bash", "zsh", "dash", "ash", "fish", "csh", "tcsh")
HOOK_FILES = ("cudafix.pth", "cudafix.start")  # at the root of site-packages (their bytes: cudafix/hook/files.py)
SCRIPT_EXTS = ("sh", "fish", "csh")


def _write_out(text: str) -> None:
    # bytes: values from the environment may hold any byte (surrogateescape round trip)
    out = getattr(sys.stdout, "buffer", None)
    data = text.encode("utf-8", "surrogateescape")
    if out is None:
        sys.stdout.write(data.decode("utf-8", "replace"))
    else:
        sys.stdout.flush()
        out.write(data)
        out.flush()


@click.command("shell")
@click.option("--shell", "shell_name", type=click.Choice(SHELL_CHOICES), required=True, help="Shell to print code for.")
@click.option("--activate", "action", flag_value="activate", help="Print activation code.")
@click.option("--deactivate", "action", flag_value="deactivate", help="Print deactivation code.")
@click.option("--write-cache", is_flag=True, hidden=True, help="Also refresh this env's activation cache (activate.d).")
@click.option("--print-dir", is_flag=True, hidden=True,
              help="Write the code to a new private file and print its directory (csh's activate.d).")
@click.option("--from", "from_file", metavar="FILE", default=None,
              help="Plan from a recorded snapshot (`cudafix snapshot`) and its environment variables instead of "
                   "this machine (what `conda activate` would do there); never writes the cache.")
def shell_cmd(shell_name: str, action: Optional[str], write_cache: bool, from_file: Optional[str] = None,
              print_dir: bool = False) -> None:
    """Print shell code applying (or undoing) cudafix's safe corrections.

    \b
    eval "$(cudafix shell --shell bash --activate)"
    cudafix shell --shell fish --activate | source
    """
    if action is None:
        raise click.UsageError("give --activate or --deactivate")
    from cudafix.activation import runtime as activation

    if action == "activate" and from_file:
        text = _activate_from(shell_name, from_file)
    elif action == "activate":
        text = activation.render_activate(shell_name, write=write_cache)
    else:
        text = activation.render_deactivate(shell_name)
    if print_dir:  # the same as activation.fast_main
        text = activation.write_private_dir(text, "activate." + shells.renderer(shell_name).EXT) + "\n"
    _write_out(text)


def _activate_from(shell_name: str, path: str) -> str:
    """Activation code for a recorded snapshot: its findings, planned against its own env."""
    from cudafix import rules
    from cudafix.activation import plan as activation
    from cudafix.model.snapshot import Snapshot, SnapshotError

    try:
        snap = Snapshot.load(path)
    except SnapshotError as exc:
        raise click.ClickException("--from %s: %s" % (path, exc))
    env = activation.restored_env(snap.env)
    plan = activation.plan_from_findings(rules.findings(rules.run(snap)), env)
    return shells.renderer(shell_name).activate(plan)


# -- hooks --------------------------------------------------------------------------------------

def script_sources() -> List[Tuple[str, str]]:
    """(relative path under etc/conda, text) of the activate.d / deactivate.d scripts."""
    out = []
    for ext in SCRIPT_EXTS:
        mod = shells.renderer(ext)
        out.append(("activate.d/cudafix." + ext, mod.static_activate()))
        out.append(("deactivate.d/cudafix." + ext, mod.static_deactivate()))
    return out


def site_packages(prefix: str) -> str:
    """The site-packages of the env at ``prefix``."""
    if os.path.realpath(prefix) == os.path.realpath(sys.prefix):
        return sysconfig.get_paths()["purelib"]
    found = sorted(glob.glob(os.path.join(glob.escape(prefix), "lib", "python3*", "site-packages")))
    if len(found) != 1:
        raise click.ClickException(
            "cannot tell the site-packages of %s (%s)" % (prefix, "none found" if not found else "several: " + ", ".join(found))
        )
    return found[0]


def planned_paths(prefix: str) -> List[str]:
    """Where `hooks install` puts its files (reads none of them: a second `hooks uninstall` of a
    wheel install, whose source files were the very ones removed, still works)."""
    site = site_packages(prefix)
    return [os.path.join(site, name) for name in HOOK_FILES] + [os.path.join(prefix, "etc", "conda", rel) for rel, _ in script_sources()]


def planned_files(prefix: str) -> List[Tuple[str, bytes]]:
    """(path, bytes) of every hook file; the startup files' bytes are data (cudafix/hook/files.py),
    never read back from site-packages, where `hooks uninstall` removed them."""
    from cudafix.hook.files import FILES

    site = site_packages(prefix)
    files: List[Tuple[str, bytes]] = [(os.path.join(site, name), data) for name, data in FILES]
    for rel, text in script_sources():
        files.append((os.path.join(prefix, "etc", "conda", rel), text.encode("utf-8")))
    return files


def _state(path: str, data: bytes) -> str:
    try:
        with open(path, "rb") as fh:
            return "installed" if fh.read() == data else "differs"
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return "unreadable (%s)" % exc.strerror


@click.group("hooks")
def hooks_cmd() -> None:
    """Add, remove or show cudafix's hooks in an environment."""


_prefix_opt = click.option(
    "--prefix", default=None, type=click.Path(file_okay=False), help="Environment prefix (default: this Python's sys.prefix)."
)


# Left in deactivate.d by conda's pre-unlink script (recipe/pre-unlink.sh) when `conda remove`
# takes cudafix while shells still hold its corrections: copies of the pure-shell deactivate
# scripts, under names no package owns, so `conda deactivate` in those shells still restores.
# Inert without _CUDAFIX_VARS; `hooks install` and `hooks uninstall` remove them.
UNLINKED = tuple("deactivate.d/cudafix-unlinked." + ext for ext in SCRIPT_EXTS)


@hooks_cmd.command("install")
@_prefix_opt
def hooks_install(prefix: Optional[str]) -> None:
    """Install the startup hook and conda's activation scripts (idempotent)."""
    prefix = os.path.abspath(prefix or sys.prefix)
    for path, data in planned_files(prefix):
        state = _state(path, data)
        if state == "installed":
            click.echo("unchanged  %s" % path)
            continue
        from cudafix.store.fsutil import atomic_write

        atomic_write(path, data, mode=0o644, make_dirs=True)
        click.echo("%s  %s" % ("updated  " if state == "differs" else "installed", path))
    for rel in UNLINKED:  # the real deactivate scripts are back
        path = os.path.join(prefix, "etc", "conda", rel)
        if os.path.lexists(path):
            os.unlink(path)
            click.echo("removed    %s" % path)


@hooks_cmd.command("uninstall")
@_prefix_opt
@click.option("--shell", "shell_name", type=click.Choice(SHELL_CHOICES), default=None,
              help="Also print code for eval that undoes cudafix's corrections in this shell "
                   "(the report then goes to stderr).")
def hooks_uninstall(prefix: Optional[str], shell_name: Optional[str] = None) -> None:
    """Remove the hooks and this env's activation cache (idempotent).

    \b
    A shell that activated the env keeps cudafix's corrections (CUDA_HOME, ...) until it
    deactivates, and `conda deactivate` needs the deactivate scripts this removes.  So in an
    activated shell, undo the corrections now, then uninstall:
      eval "$(cudafix hooks uninstall --shell bash)" && python -m pip uninstall cudafix
    """
    from cudafix.activation import runtime as activation

    def say(line: str) -> None:
        click.echo(line, err=shell_name is not None)

    failed: List[str] = []
    try:
        prefix = os.path.abspath(prefix or sys.prefix)
        paths = planned_paths(prefix) + [os.path.join(prefix, "etc", "conda", r) for r in UNLINKED]
        for path in paths:
            if os.path.lexists(path):
                try:
                    os.unlink(path)
                    say("removed    %s" % path)
                except OSError as exc:  # the undo code below is printed all the same
                    failed.append(path)
                    say("cannot remove %s: %s" % (path, exc.strerror or exc))
        # directories install may have created, when nothing else is in them
        for sub in ("etc/conda/activate.d", "etc/conda/deactivate.d", "etc/conda", "etc"):
            try:
                os.rmdir(os.path.join(prefix, sub))
            except OSError:
                pass
        for p in activation.remove_cache(prefix, os.environ):
            say("removed    %s" % p)
    finally:
        # the undo code even when something above failed: `eval ... && pip uninstall` must work
        if shell_name is not None:
            _write_out(activation.render_deactivate(shell_name))
    if failed:
        sys.exit(1)


@hooks_cmd.command("status")
@_prefix_opt
def hooks_status(prefix: Optional[str]) -> None:
    """Show which hook files are installed; exit 1 unless all are."""
    prefix = os.path.abspath(prefix or sys.prefix)
    ok = True
    for path, data in planned_files(prefix):
        state = _state(path, data)
        ok = ok and state == "installed"
        click.echo("%-10s %s" % (state, path))
    sys.exit(0 if ok else 1)


COMMANDS: list = [shell_cmd, hooks_cmd]
