"""The activation plan: which safe fixes `conda activate` applies, its summary line, its cache.

Pipeline (cold path, run by the env's own python from activate.d):

  environment (with any previous cudafix activation undone: :func:`restored_env`)
    -> probes.take_snapshot -> rules -> findings
    -> :func:`plan_from_findings`   (safe fixes of scope activation/both, as final values)
    -> :func:`guard_for`            (what the plan depends on, testable by shell builtins)
    -> shell code (cudafix.render.shells.*) printed, and the same code cached per user and env.

The cache is a shell file per env and shell family under
``<XDG_CACHE_HOME or ~/.cache>/cudafix/activation/<CONDA_PREFIX>.cudafix/activate.<ext>``: the
prefix is spelled literally in the path so that the activate script finds the file by string
concatenation, without starting a process.  docs/activation.md describes the protocol.
"""

from __future__ import annotations

import os
import re
import sys
import sysconfig
import time
from typing import Dict, Iterable, List, Mapping, Optional, Sequence

from cudafix.knowledge import env_vars
from cudafix.render import shells
from cudafix.store.fsutil import atomic_write
from cudafix.model.fixes import EnvPatch
from cudafix.render.shells import Guard, Plan

# Variables the probes and rules read (the table's ACTIVATION rows, cudafix/knowledge/env_vars.py).
# The cache is keyed on their exact values (unset, empty and set are three different keys); the
# names in a snapshot's ``env`` and the names a plan touches are added to these.
KEY_VARS = env_vars.names(env_vars.ACTIVATION)

# Files and directories whose change may change the plan (mtime of a directory changes when an
# entry is added, removed or renamed: a conda / pip (un)install, a toolkit added, a relinked
# /usr/local/cuda, a driver module reloaded).
SYSTEM_WATCH = ("/usr/local", "/etc/ld.so.cache", "/sys/module/nvidia")

SUMMARY_SEVERITIES = ("error", "warning")
MAX_WATCH = 32


# -- undoing a previous activation (the Python twin of the shells' restore code) ----------------

def restored_env(env: Mapping[str, str]) -> Dict[str, str]:
    """``env`` as it will be once the shell's restore code has run (see cudafix.render.shells)."""
    out = dict(env)
    names = out.get("_CUDAFIX_VARS")
    if names is None:
        return out
    listed = set(names.split(" "))
    for name in shells.MANAGED:  # only the managed variables, whatever _CUDAFIX_VARS lists
        if name not in listed:
            continue
        old = out.get("_CUDAFIX_OLD_" + name, "")
        new = out.get("_CUDAFIX_NEW_" + name, "")
        cur = shells.encode_state(out.get(name))
        if old and cur == new:
            if old.startswith("s:"):
                out[name] = old[2:]
            else:
                out.pop(name, None)
        out.pop("_CUDAFIX_OLD_" + name, None)
        out.pop("_CUDAFIX_NEW_" + name, None)
    out.pop("_CUDAFIX_VARS", None)
    return out


# -- the plan -----------------------------------------------------------------------------------

def _is_safe_for_activation(finding) -> bool:
    fix = finding.fix
    return bool(fix and fix.auto and fix.scope in ("activation", "both") and fix.env)


def _reason(summary: str) -> str:
    """A safe fix's summary may end with a parenthesised reason: the line shows it."""
    m = re.search(r"(\([^()]*\))\s*\.?\s*$", summary or "")
    return m.group(1) if m else ""


def _describe(op, before: Mapping[str, str]) -> str:
    if op.op == "set":
        return "%s \u2192 %s" % (op.name, op.value or "''")
    if op.op == "unset":
        return "%s unset" % op.name
    if op.op == "prepend-path":
        return "%s +%s" % (op.name, op.value)
    if op.op == "remove-path":
        return "%s \u2212%s" % (op.name, op.value)
    return op.name


def _plural(n: int, word: str) -> str:
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


def plan_from_findings(findings: Sequence, env: Mapping[str, str]) -> Plan:
    """Apply, in order, the env parts of the safe fixes whose scope includes activation.

    The plan holds final values, so the shells never compute list edits themselves.  Ops on
    variables activation cannot manage (PATH, CONDA_*, ...) are left out.  The line counts the
    error/warning findings still open: not corrected, or corrected but with advice commands left
    for the user (arch-ptx-jit: the cache is raised, a native build is still the real fix).
    """
    cur: Dict[str, str] = dict(env)
    order: List[str] = []
    parts: List[str] = []
    applied = set()
    for i, f in enumerate(findings):
        if not _is_safe_for_activation(f):
            continue
        ops = tuple(op for op in f.fix.env.ops if shells.manageable(op.name))
        if not ops:
            continue
        before = dict(cur)
        EnvPatch(ops).apply(cur)
        changed = [op for op in ops if before.get(op.name) != cur.get(op.name) or ((op.name in before) != (op.name in cur))]
        if not changed:
            continue
        if not f.fix.commands:  # applied, and nothing left for the user to do
            applied.add(i)
        for op in ops:
            if op.name not in order:
                order.append(op.name)
        desc = ", ".join(_describe(op, before) for op in changed)
        reason = _reason(f.fix.summary)
        parts.append(desc + (" " + reason if reason else ""))
    changes = tuple((n, cur.get(n)) for n in order if (n in cur) != (n in env) or cur.get(n) != env.get(n))
    counts = {s: 0 for s in SUMMARY_SEVERITIES}
    for i, f in enumerate(findings):
        if i not in applied and f.severity in counts:
            counts[f.severity] += 1
    tail = [_plural(counts[s], s) for s in SUMMARY_SEVERITIES if counts[s]]
    summary = None
    if changes or tail:
        head = "; ".join([p for p in parts if changes] + ([", ".join(tail)] if tail else []))
        summary = shells.one_line("cudafix: %s \u2014 cudafix status" % head)
    return Plan(changes=changes, summary=summary)


# -- what the plan depends on -------------------------------------------------------------------

def _site_dirs() -> List[str]:
    out: List[str] = []
    for key in ("purelib", "platlib"):
        try:
            p = sysconfig.get_paths()[key]
        except Exception:
            continue
        if p not in out:
            out.append(p)
    return out


def watch_paths(snapshot, prefix: Optional[str], env: Mapping[str, str]) -> List[str]:
    paths: List[str] = []
    if prefix:
        paths.append(os.path.join(prefix, "conda-meta"))
    paths.extend(_site_dirs())
    paths.extend(SYSTEM_WATCH)
    paths.extend(d for d in env.get("LD_LIBRARY_PATH", "").split(":") if d.startswith("/"))
    if snapshot is not None:
        try:
            paths.extend(t.path for t in snapshot.toolkits.toolkits if t.path)
            if snapshot.driver.libcuda_path:
                paths.append(snapshot.driver.libcuda_path)
        except AttributeError:
            pass
    seen: List[str] = []
    for p in paths:
        if p and p.startswith("/") and p not in seen:
            seen.append(p)
    return seen[:MAX_WATCH]


def guard_for(env: Mapping[str, str], plan: Plan, snapshot=None, prefix: Optional[str] = None) -> Guard:
    names: List[str] = list(KEY_VARS)
    extra: Iterable[str] = ()
    if snapshot is not None:
        extra = list(getattr(snapshot, "env", {}) or {})
    for n in list(extra) + [n for n, _v in plan.changes]:
        if shells.NAME_RE.match(n) and n not in names:
            names.append(n)
    values = tuple((n, env.get(n)) for n in names)
    newer: List[str] = []
    absent: List[str] = []
    for p in watch_paths(snapshot, prefix, env):
        (newer if os.path.lexists(p) else absent).append(p)
    return Guard(values=values, newer=tuple(newer), absent=tuple(absent))


# -- the cache file -----------------------------------------------------------------------------

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
    env = restored_env(environ)
    # The cache file is dated 1 s before the probes start: a change at or after that instant is
    # newer than the cache both to shells that compare mtimes in nanoseconds and to those that
    # compare whole seconds (tcsh -M).  A change in that last second costs one extra cold run.
    stamp = time.time() - 1.0
    try:
        snap, found = collect(env)
        plan = plan_from_findings(found, env)
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
    import tempfile

    d = tempfile.mkdtemp(prefix="cudafix-activate-")
    fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(text.encode("utf-8", "surrogateescape"))
    return d


def _start_warm(snap, found, plan: Plan, env: Mapping[str, str]) -> None:
    """PTX JIT applies (arch-ptx-jit / ext-ptx-jit): compile it now, in the background, with the
    environment the activated shell will have (cudafix/plans/warm.py).  Never fails activation."""
    try:
        from cudafix.plans import warm
        from cudafix.store import paths

        if not warm.should_start([f.rule for f in found]):
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
    click and every command costs ~50 ms on the activation cold path; this skips it.
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
