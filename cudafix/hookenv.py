"""The startup hook's `import torch` half and its cache writer format (stdlib only, Python 3.8).

_cudafix_startup (the part that runs at every interpreter start) stays small; what runs only
when torch is imported lives here: the cold recompute when the cache was stale (through
cudafix.hookplan), library preloads by absolute path, and the warnings.  Importing this module
imports nothing beyond the stdlib and _cudafix_startup.
"""

import os
import sys

import _cudafix_startup as hook


class Entry(list):
    """A cache entry: the list [fp, post_fp, stats, ops, preloads, warns] the hook parses."""

    def __init__(self, fp, post_fp, stats=(), ops=(), preloads=(), warns=()):
        super().__init__([fp, post_fp, list(stats), list(ops), list(preloads), list(warns)])

    fp = property(lambda self: self[0])
    post_fp = property(lambda self: self[1])
    stats = property(lambda self: self[2])  # [(path, stat sig)]
    ops = property(lambda self: self[3])  # [(rule, op, name, value)]
    preloads = property(lambda self: self[4])  # [(rule, soname, path)]
    warns = property(lambda self: self[5])  # [(rule, quiet if fixed, line if fixed, line if not)]


def _enc(value):
    if value is None:
        return "-"
    return value.encode("utf-8", "surrogateescape").hex()


def dump_entries(entries):
    """The cache file's bytes (format: see _cudafix_startup)."""
    out = [hook.MAGIC.decode("ascii")]
    for fp, post_fp, stats, ops, preloads, warns in entries:
        out.append("E %s %s" % (fp, post_fp))
        out.extend("S %s %s" % (_enc(p), _enc(s)) for p, s in stats)
        out.extend("O %s %s %s %s" % tuple(_enc(x) for x in op) for op in ops)
        out.extend("P %s %s %s" % tuple(_enc(x) for x in p) for p in preloads)
        out.extend("W %s %d %s %s" % (_enc(r), 1 if q else 0, _enc(a), _enc(b)) for r, q, a, b in warns)
    out.append("END")
    return ("\n".join(out) + "\n").encode("ascii")


def is_import(frame):
    """True when find_spec was called by an import, not by a probe (importlib.util.find_spec)."""
    frame = frame.f_back if frame is not None else None  # the caller of importlib's _find_spec
    return frame is None or frame.f_code.co_name in ("_find_and_load_unlocked", "_find_and_load")


def remove_finder(finder):
    # Rebind, never mutate: importlib is iterating over the current list right now, and removing
    # our item from it would make that loop skip the finder after us.
    if any(f is finder for f in sys.meta_path):
        sys.meta_path = [f for f in sys.meta_path if f is not finder]


def on_torch(finder, frame):
    """The finder saw the name ``torch``; ``frame`` is its caller's (importlib's _find_spec)."""
    if frame is not None and frame.f_code.co_name == "_find_spec" and not is_import(frame):
        return  # a find_spec probe: stay installed for the real import
    remove_finder(finder)
    at_torch_import(finder.state)


def preloads_due(st, entry):
    if st.mode != "fix":
        return []
    return [p for p in entry[4] if p[0] not in st.skip]


def warnings_due(st, entry, environ, preloaded):
    """[(rule, line)] still to say in this process tree."""
    warned = (environ.get(hook.WARNED_VAR) or "").split(",")
    applied = [a[0] for a in st.applied]
    out = []
    for rule, quiet, line_fixed, line_unfixed in entry[5]:
        if rule in st.skip or rule in warned:
            continue
        fixed = st.mode == "fix" and (rule in preloaded or rule in applied)
        if not (fixed and quiet):
            out.append((rule, line_fixed if fixed else line_unfixed))
    return out


def at_torch_import(st):
    """Called once by the hook's finder, just before torch's own import proceeds."""
    environ = os.environ
    entry = st.entry
    if entry is None:
        try:
            from cudafix import hookplan
        except Exception as exc:  # noqa: BLE001 - a broken install: say nothing unless asked
            hook.say(st, "cudafix package not importable (%s): nothing checked" % type(exc).__name__)
            return
        entry = hookplan.cold(st)
        if entry is None:
            return
        st.entry = entry
        hook.apply_env(st, entry, environ)
    preloaded = []
    preloads = preloads_due(st, entry)
    if preloads:
        import ctypes

        for rule, soname, path in preloads:
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                st.preloaded.append(path)
                preloaded.append(rule)
                hook.say(st, "preloaded %s for %s [%s]" % (path, soname, rule))
            except Exception as exc:  # noqa: BLE001
                hook.say(st, "could not preload %s: %s" % (path, exc))
    failed = [p[0] for p in preloads if p[0] not in preloaded]
    due = warnings_due(st, entry, environ, [r for r in preloaded if r not in failed])
    if due:
        import warnings

        for rule, line in due:
            # 1 this function, 2 on_torch, 3 the finder's find_spec, 4 the frame that imports
            # torch (the warnings module skips importlib's own frames)
            warnings.warn(line, hook.CudafixWarning, stacklevel=4)
        old = [r for r in (environ.get(hook.WARNED_VAR) or "").split(",") if r]
        try:
            environ[hook.WARNED_VAR] = ",".join(old + [r for r, _ in due if r not in old])
        except Exception:  # noqa: BLE001
            pass
