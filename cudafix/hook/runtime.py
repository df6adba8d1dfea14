"""The startup hook's work, all of it at `import torch` (stdlib only, Python 3.8).

_cudafix_startup (unmarshalled and run at every interpreter start) only installs a finder for the
name `torch`.  Everything else lives here and runs when that finder sees `import torch`: the
check (fingerprint -> per-env cache entry (cudafix.hook.cache) -> in-process env corrections),
the cold recompute when the cache was stale (cudafix.hook.plan, imported then), library preloads by
absolute path, and the warnings, once per process group.  The check's result lives here, in
``state`` (None until the check ran; :func:`check` runs it and returns it).  Files are read and
written only through cudafix.store.safefs (the one trust check).  It runs at `import torch`, after
the stdlib is loaded, so it uses the package's own types and tables (the env-var table, EnvOp)."""

import os
import sys

from cudafix.hook import cache
from cudafix.hook.cache import apply_op, exec_loader_vars, keyed
from cudafix.knowledge.env_vars import LOADER_VARS
from cudafix.knowledge.knobs import flag_on  # the one truthiness rule of CUDAFIX_* flags
from cudafix.store import safefs

WARNED_VAR = "CUDAFIX_WARNED"  # rule ids already warned about in this process tree



_NS = type(sys.implementation)  # types.SimpleNamespace




class CudafixWarning(UserWarning):
    """Category of cudafix's warnings at ``import torch`` (filter it like any warning)."""


state = None  # the check's result in this process (check() sets it once)


# -- what the start computes, written plainly  ---------

# -- CUDAFIX_DEBUG ------------------------------------------------------------------------------

def say(st, msg):
    """Record a decision; print it (one line, stderr) under CUDAFIX_DEBUG=1."""
    st.log.append(msg)
    if st.debug:
        try:
            err = sys.stderr
            if err is not None:
                err.write("cudafix: %s\n" % msg)
                err.flush()
        except Exception:  # noqa: BLE001
            pass


def say_ops(st, entry):
    """The lines for what apply_env did with the entry's corrections."""
    failed = {id(op): exc for op, exc in st.failed}
    applied = {id(op) for op in st.applied}
    for op in entry.ops:
        rule, name, value = op[0], op[2], op[3]
        if id(op) in applied:
            say(st, "%s %s%s [%s]" % (op[1], name, "" if value is None else "=" + value, rule))
        elif id(op) in failed:
            say(st, "could not %s %s: %s" % (op[1], name, failed[id(op)]))
        else:
            say(st, "not applied: %s %s [%s]" % (op[1], name, rule))


def explain(st):
    """Under CUDAFIX_DEBUG=1, after check(): one line per decision it made, and why."""
    get = os.environ.get
    if flag_on(get("CUDAFIX_DISABLE")):
        return say(st, "CUDAFIX_DISABLE is set: doing nothing")
    mode = (get("CUDAFIX_MODE") or "fix").strip().lower()
    if mode not in ("fix", "warn", "off"):
        say(st, "CUDAFIX_MODE=%r is not fix|warn|off: using fix" % mode)
    if st.mode == "off":
        return say(st, "CUDAFIX_MODE=off: doing nothing")
    if st.error is not None:
        return say(st, "internal error, hook skipped: %s: %s" % (type(st.error).__name__, st.error))
    if st.entry is None:
        entries, why = cache.read_cache(st.cache_path, (st.fp,))
        if why is None:
            why = "no fresh cache entry"
        return say(st, "%s: the check runs now, at `import torch` (cache %s)" % (why, st.cache_path))
    say(st, "cache fresh (%s)" % st.cache_path)
    say_ops(st, st.entry)


# -- the check, at `import torch` (it ran at every interpreter start before 2026-11-30) -------

def find_finder():
    """The hook's finder in sys.meta_path, or None."""
    for f in sys.meta_path:
        if not isinstance(f, type) and getattr(f, "cudafix", False) is True:
            return f
    return None


def check(finder=None):
    """The check, once per process: policy, fingerprint, this env's cache entry, its in-process env
    corrections.  Run by the finder at `import torch`; returns the state (this module's ``state``).  Never raises."""
    global state
    st = state
    if st is not None:
        return st
    # active: not disabled nor off; why: what the check found (CUDAFIX_DEBUG says it);
    # failed: [(op, exception)]
    st = state = _NS(mode="fix", active=False, skip=frozenset(), debug=False, syspath=[], fp=None,
                          cache_path=None, seen_env=None, entry=None, applied=[], preloaded=[], finder=None, log=[],
                          failed=[], error=None)
    try:
        environ = os.environ
        get = environ.get
        st.debug = flag_on(get("CUDAFIX_DEBUG"))
        on = not flag_on(get("CUDAFIX_DISABLE"))
        mode = (get("CUDAFIX_MODE") or "fix").strip().lower()
        if on and mode in ("warn", "off"):
            st.mode = mode  # (an unknown mode: the default, fix)
        if on and mode != "off":
            st.active = True
            skip = get("CUDAFIX_SKIP")
            if skip:
                st.skip = frozenset(map(str.strip, skip.split(",")))
            st.finder = finder = finder if finder is not None else find_finder()
            # the sys.path of the start (saved by the finder), not today's: `-c` and scripts add
            # their own directory, which must not make a new cache entry per directory
            start_path = getattr(finder, "path", None)
            st.syspath, st.seen_env, st.fp, st.cache_path = keyed(
                environ, start_path if isinstance(start_path, list) else None, cache.CACHE_FILE)
            st.entry = cache.lookup(st.cache_path, st.fp)
            if st.entry is not None:
                apply_env(st, st.entry, environ)
    except Exception as exc:  # noqa: BLE001 - never break an interpreter
        st.error = exc
    if st.debug:
        try:
            explain(st)
        except Exception:  # noqa: BLE001
            pass
    return st


def apply_env(st, entry, environ):  # the entry's in-process corrections that the policy allows
    for op in entry.ops:
        if st.mode == "fix" and op[0] not in st.skip and op[2] not in LOADER_VARS:
            try:
                apply_op(environ, op[1], op[2], op[3])
                st.applied.append(op)
            except Exception as exc:  # noqa: BLE001
                st.failed.append((op, exc))


def is_import(frame):
    """True when find_spec was called by an import, not by a probe (importlib.util.find_spec)."""
    frame = frame.f_back if frame is not None else None  # the caller of importlib's _find_spec
    return frame is None or frame.f_code.co_name in ("_find_and_load_unlocked", "_find_and_load")


def remove_finder(finder):
    # Rebind, never mutate: importlib is iterating over the current list right now, and removing
    # our item from it would make that loop skip the finder after us.
    if any(f is finder for f in sys.meta_path):
        sys.meta_path = [f for f in sys.meta_path if f is not finder]


def on_torch(frame):
    """The finder saw the name ``torch``; ``frame`` is its caller's (importlib's _find_spec)."""
    finder = find_finder()
    if finder is None:
        return
    if frame is not None and frame.f_code.co_name == "_find_spec" and not is_import(frame):
        return  # a find_spec probe: stay installed for the real import
    remove_finder(finder)
    st = check(finder)
    if st.active and st.error is None:
        at_torch_import(st)


def preloads_due(st, entry):
    if st.mode != "fix":
        return []
    return [p for p in entry.preloads if p[0] not in st.skip]


def warnings_due(st, entry, environ, preloaded):
    """[(rule, line)] still to say in this process tree."""
    warned = (environ.get(WARNED_VAR) or "").split(",")
    applied = [a[0] for a in st.applied]
    out = []
    for rule, quiet, line_fixed, line_unfixed in entry.warns:
        if rule in st.skip or rule in warned:
            continue
        fixed = st.mode == "fix" and (rule in preloaded or rule in applied)
        if not (fixed and quiet):
            out.append((rule, line_fixed if fixed else line_unfixed))
    return out


# Once per process group, not once per sibling (issue 18 item 7).  CUDAFIX_WARNED covers the
# process tree below a process that warned; a launcher that never imports torch and starts N
# workers (multiprocessing spawn/fork/forkserver, pools, xargs -P, DataLoader workers) has no such
# process, but all of them share its process group.  So each warning is claimed with an empty
# marker file per (process group, its leader's start time, rule), created O_CREAT|O_EXCL in the
# env's cache dir: of racing siblings exactly one creates it and warns.  A shell with job control
# gives each command line its own group, so the next run of a script warns again.  The leader's
# start time (/proc/<pgid>/stat) tells a reused pgid apart; markers of dead groups are removed.

def group_key(pid=None):
    """'<pgid>.<start time of the group's leader>' ('<pgid>.0' when the leader is gone)."""
    pgid = os.getpgid(0 if pid is None else pid)
    return "%d.%s" % (pgid, _start_time(pgid) or "0")


def _start_time(pid):
    try:
        fd = os.open("/proc/%d/stat" % pid, os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = os.read(fd, 4096)
        finally:
            os.close(fd)
        return data[data.rindex(b")") + 2:].split()[19].decode("ascii")  # field 22: starttime
    except (OSError, ValueError, IndexError):
        return None


def claim_warnings(st, due):
    """The warnings of ``due`` no other process of this group said yet (all of them when the
    markers cannot be kept: then once per process tree, as CUDAFIX_WARNED does)."""
    d = None
    try:
        key = group_key()
        d = safefs.open_dir(os.path.dirname(st.cache_path), create=True) if st.cache_path else None
        if d is None:
            return due
        out = []
        for rule, line in due:
            name = "warned.%s.%s" % (key, rule)
            if not rule.replace("-", "").replace("_", "").isalnum() or safefs.create_once(d, name):
                out.append((rule, line))
            else:
                say(st, "not warning [%s]: already said in process group %s" % (rule, key))
        if out:
            _prune_markers(d)
        return out
    except Exception:  # noqa: BLE001 - never lose a warning to the marker mechanism
        return due
    finally:
        if d is not None:
            os.close(d)


def _prune_markers(d):
    for name in os.listdir(d):
        if name.startswith("warned."):
            parts = name.split(".")
            try:
                alive = _start_time(int(parts[1])) == parts[2] or parts[2] == "0" and os.getpgid(int(parts[1])) == int(parts[1])
            except (OSError, ValueError, IndexError):
                alive = False
            if not alive:
                try:
                    os.unlink(name, dir_fd=d)
                except OSError:
                    pass


def at_torch_import(st):
    """Called once by the hook's finder, just before torch's own import proceeds."""
    environ = os.environ
    entry = st.entry
    if entry is None:
        try:
            from cudafix.hook import plan as hookplan
        except Exception as exc:  # noqa: BLE001 - a broken install: say nothing unless asked
            say(st, "cudafix package not importable (%s): nothing checked" % type(exc).__name__)
            return
        entry, msg = hookplan.cold(st.cache_path, st.syspath, st.seen_env)
        say(st, msg)
        st.entry = entry
        apply_env(st, entry, environ)
        say_ops(st, entry)
    preloaded = []
    preloads = preloads_due(st, entry)
    if preloads:
        from cudafix.store import trustload

        owners = safefs.env_owners(sys.prefix)
        lib_path = (exec_loader_vars() or environ).get("LD_LIBRARY_PATH")
        for rule, soname, path in preloads:
            why = safefs.preload_refusal(path, lib_path, owners)  # the relative-dir rule; files change
            if why is not None:
                say(st, "not preloading %s for %s: %s [%s]" % (path, soname, why, rule))
                continue
            try:
                # checked and loaded in one resolution (the trusted loader): a link flipped after
                # the check above is caught by this one, never loaded
                lib, _, why = trustload.load(path, owners, False, os.RTLD_GLOBAL)
                if lib is None:
                    say(st, "not preloading %s for %s: %s [%s]" % (path, soname, why, rule))
                    continue
                st.preloaded.append(path)
                preloaded.append(rule)
                say(st, "preloaded %s for %s [%s]" % (path, soname, rule))
            except Exception as exc:  # noqa: BLE001
                say(st, "could not preload %s: %s" % (path, exc))
    failed = [p[0] for p in preloads if p[0] not in preloaded]
    due = warnings_due(st, entry, environ, [r for r in preloaded if r not in failed])
    if due:
        due = claim_warnings(st, due)
    if due:
        import warnings

        for rule, line in due:
            # 1 this function, 2 on_torch, 3 the finder's find_spec, 4 the frame that imports
            # torch (the warnings module skips importlib's own frames)
            warnings.warn(line, CudafixWarning, stacklevel=4)
        old = [r for r in (environ.get(WARNED_VAR) or "").split(",") if r]
        try:
            environ[WARNED_VAR] = ",".join(old + [r for r, _ in due if r not in old])
        except Exception:  # noqa: BLE001
            pass
