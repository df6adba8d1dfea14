"""Activation at run time: the shell code `conda activate` runs, its per-user cache, the fast path.

The plan itself (which safe fixes, the summary line, what it depends on) is
cudafix/activation/plan.py; this module renders it with the shell's renderer
(cudafix.activation.shells.*), caches the code per user and env, and serves activate.d's
`python -m cudafix shell activate` (``fast_main``: the warm path starts no process).

The cache is a shell file per env and shell family under
``<XDG_CACHE_HOME or ~/.cache>/cudafix/activation/<CONDA_PREFIX>.cudafix/activate.<ext>``: the
prefix is spelled literally in the path so that the activate script finds the file by string
concatenation, without starting a process.  docs/activation.md describes the protocol.
"""

from __future__ import annotations

import os
import sys
import time
from typing import List, Mapping, Optional, Sequence

from cudafix.activation.plan import (
    ActivationPlan,
    guard_for,
    plan_from_environment,
    restored_env,
)
from cudafix.activation import shells
from cudafix.plans.environment import environment_plan  # built here once: activation's part and the warm decision
from cudafix.store.fsutil import atomic_write

def cache_base(env: Mapping[str, str]) -> Optional[str]:
    """Same choice as the static activate scripts: XDG_CACHE_HOME, else HOME/.cache; else none."""
    xdg = env.get("XDG_CACHE_HOME", "")
    if xdg.startswith("/"):
        return xdg + "/cudafix/activation"
    home = env.get("HOME", "")
    if home.startswith("/"):
        return home + "/.cache/cudafix/activation"
    return None


def prefix_ok(prefix: str) -> bool:
    if not prefix.startswith("/"):
        return False
    return not any(s in prefix for s in ("//", "/./", "/../")) and not prefix.endswith(("/.", "/.."))


def cache_file(prefix: str, family: str, env: Mapping[str, str]) -> Optional[str]:
    base = cache_base(env)
    if base is None or not prefix_ok(prefix):
        return None
    ext = shells.renderer(family).EXT
    return base + prefix + ".cudafix/activate." + ext


def _private_dirs(base: str, leaf: str) -> bool:
    """Create base..leaf as 0700 dirs owned by us; refuse a path another user could write or
    link (cudafix.store.safefs.open_dir: the one trust check of every cache)."""
    from cudafix.store import safefs

    fd = safefs.open_dir(leaf, create=True)
    if fd is None:
        return False
    os.close(fd)
    return True


def write_cache(path: str, files: Mapping[str, str], stamp: float, env: Mapping[str, str]) -> bool:
    """Write each file (name -> text) next to ``path`` atomically, mode 0600, dated ``stamp``
    (before the probes ran), in the given order."""
    base = cache_base(env)
    if base is None:
        return False
    d = os.path.dirname(path)
    if not _private_dirs(base, d):
        return False
    for name, text in files.items():
        _write_one(os.path.join(d, name), text, stamp)
    return True


def _write_one(path: str, text: str, stamp: float) -> None:
    atomic_write(path, text.encode("utf-8", "surrogateescape"), mode=0o600, mtime=stamp)


def remove_cache(prefix: str, env: Mapping[str, str]) -> List[str]:
    """Remove this env's cache files (all families) and the now-empty directories above them."""
    removed: List[str] = []
    base = cache_base(env)
    p = cache_file(prefix, "sh", env)
    if p and base:
        d = os.path.dirname(p)
        from cudafix.store import safefs

        fd = safefs.open_dir(d)  # never through another user's link or directory (docs/security.md)
        if fd is None:
            return removed
        os.close(fd)
        try:
            names = sorted(os.listdir(d))
        except OSError:
            names = []
        for name in names:  # our files only: activate.*, apply.*, and temp files of a crashed write
            if name.startswith(("activate.", "apply.", ".activate.")):
                os.unlink(os.path.join(d, name))
                removed.append(os.path.join(d, name))
        while d.startswith(base) and len(d) >= len(base):
            try:
                os.rmdir(d)
            except OSError:
                break
            d = os.path.dirname(d)
    return removed


# -- the whole cold path ------------------------------------------------------------------------

def collect(env: Mapping[str, str]):
    """(snapshot, findings) for this interpreter's environment, seen with ``env``."""
    from cudafix import probes, rules
    from cudafix.store import paths

    # The per-env cache (fatbin scan, loader simulation, nvcc version) is shared with `status`.
    snap = probes.take_snapshot(env=dict(env), cache_dir=paths.env_cache_dir(sys.prefix, env))
    return snap, rules.findings(rules.run(snap))


def _conda_prefix(env: Mapping[str, str]) -> Optional[str]:
    """CONDA_PREFIX, spelled as the shell spells it, when it is this interpreter's prefix."""
    prefix = env.get("CONDA_PREFIX")
    if not prefix:
        return None
    try:
        if os.path.samefile(prefix, sys.prefix):
            return prefix
    except OSError:
        pass
    return None


def render_activate(shell: str, environ: Optional[Mapping[str, str]] = None, write: bool = False) -> str:
    """Shell code that (re)activates cudafix's corrections; with ``write``, also cache it."""
    mod = shells.renderer(shell)
    environ = os.environ if environ is None else environ
    from cudafix.knowledge import knobs

    if knobs.flag(environ, "CUDAFIX_DISABLE"):
        # what the activate.d scripts do when it is on: undo a previous activation, apply nothing
        # (`shell --activate` is the venv route of docs/install.md: it must obey it too)
        return mod.restore()
    env = restored_env(environ)
    # The cache file is dated 1 s before the probes start: a change at or after that instant is
    # newer than the cache both to shells that compare mtimes in nanoseconds and to those that
    # compare whole seconds (tcsh -M).  A change in that last second costs one extra cold run.
    stamp = time.time() - 1.0
    try:
        snap, found = collect(env)
        plan = plan_from_environment(environment_plan(found), env)
        _start_warm(snap, found, plan, env)
    except Exception as exc:  # activation must still complete: one line, nothing changed
        return mod.restore() + mod.skipped("%s: %s" % (type(exc).__name__, exc))
    if write:
        prefix = _conda_prefix(env)
        path = cache_file(prefix, shell, env) if prefix else None
        if path:
            try:
                guard = guard_for(env, plan, snap, prefix)
                write_cache(path, mod.cache_files(guard, plan, _version()), stamp, env)
            except OSError:
                pass  # no cache: the next activation takes the cold path again
    return mod.activate(plan)


def write_private_dir(text: str, name: str) -> str:
    """Write ``text`` to ``name`` in a new private directory (mkdtemp: 0700, unpredictable name)
    and return the directory.  csh's cold path sources the file and removes both: csh cannot eval
    multi-line code, and this works where no cache can be written (HOME unset, cache unwritable)."""
    from cudafix.store.safefs import new_private_dir_file

    return new_private_dir_file(name, text.encode("utf-8", "surrogateescape"), "cudafix-activate-")


def _start_warm(snap, found, plan: ActivationPlan, env: Mapping[str, str]) -> None:
    """PTX JIT applies (arch-ptx-jit / ext-ptx-jit): compile it now, in the background, with the
    environment the activated shell will have (cudafix/warm/runtime.py).  Never fails activation."""
    try:
        from cudafix.warm import runtime as warm
        from cudafix.store import paths

        if warm.TRIGGER_RULES.isdisjoint(f.rule for f in found):
            return
        after = dict(env)
        for name, value in plan.changes:
            if value is None:
                after.pop(name, None)
            else:
                after[name] = value
        warm.start_background(snap, [f.rule for f in found], after, paths.env_cache_dir(sys.prefix, env))
    except Exception:
        pass  # a warm that cannot start costs only the first run's JIT


def render_deactivate(shell: str) -> str:
    return shells.renderer(shell).deactivate()


def _version() -> str:
    from cudafix import __version__

    return __version__


# -- `python -m cudafix shell ...` without click (the cold path of every activation) ------------

def fast_main(argv: Sequence[str]) -> Optional[int]:
    """Handle exactly `shell --shell S --activate|--deactivate [--write-cache] [--print-dir]` (any
    order).  With --print-dir (csh's cold path) the code goes to a private file
    (:func:`write_private_dir`) and stdout holds only that file's directory.

    Returns None for anything else, which then goes to the click CLI (help, errors).  Importing
    click and every command is most of the activation cold path (docs/benchmarks.md); this skips it.
    """
    args = list(argv)
    if not args or args[0] != "shell":
        return None
    rest = args[1:]
    shell = None
    action = None
    write = False
    to_dir = False
    i = 0
    while i < len(rest):
        a = rest[i]
        if a == "--shell" and i + 1 < len(rest):
            shell = rest[i + 1]
            i += 2
            continue
        if a.startswith("--shell="):
            shell = a.split("=", 1)[1]
        elif a in ("--activate", "--deactivate") and action is None:
            action = a[2:]
        elif a == "--write-cache":
            write = True
        elif a == "--print-dir":
            to_dir = True
        else:
            return None
        i += 1
    if shell not in shells.SHELL_FAMILY or action is None:
        return None
    text = render_activate(shell, write=write) if action == "activate" else render_deactivate(shell)
    if to_dir:
        text = write_private_dir(text, "activate." + shells.renderer(shell).EXT) + "\n"
    out = getattr(sys.stdout, "buffer", None)
    if out is None:
        sys.stdout.write(text)
    else:
        out.write(text.encode("utf-8", "surrogateescape"))
    sys.stdout.flush()
    return 0
