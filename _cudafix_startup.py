"""cudafix's startup hook (docs/hook.md): run() installs the `import torch` finder; never raises."""

# Named by cudafix.pth (Python < 3.15), which loads this file from its own site-packages dir
# (never through sys.path: an empty PYTHONPATH entry would find a file of this name in the
# current directory), and by cudafix.start (PEP 829, >= 3.15).  Every interpreter of the env
# unmarshals and runs this module, so it does only this: honour CUDAFIX_DISABLE and
# CUDAFIX_MODE=off, and install a sys.meta_path finder for the name `torch` (no file read, no
# stat).  The check itself (fingerprint, cache, env corrections, recompute, preloads, warnings)
# runs in that finder, at `import torch`: cudafix.hook.runtime, which also holds its state.
#
# No module-level `import os, sys`: the finder in sys.meta_path keeps this module's globals alive
# until the interpreter's finalization, and globals holding the os and sys modules keep those
# alive past its first collection, so their dicts are then cleared one by one: ~0.45 M
# instructions at every exit (callgrind: docs/benchmarks.md).  Imports are local instead.

_started = False


def run():  # entry point (cudafix.pth / cudafix.start): works once per process, never raises
    global _started
    if _started:
        return
    _started = True
    try:
        import os
        import sys

        get = os.environ._data.get  # os.environ's bytes: no KeyError raised inside Mapping.get
        no = (b"", b"0", b"no", b"false", b"off")  # knowledge/knobs.py FALSE_WORDS (tests/test_knobs.py)
        msg = "CUDAFIX_DISABLE is set: doing nothing"
        v = get(b"CUDAFIX_DISABLE")
        if v is None or v.lower() in no:
            msg = "CUDAFIX_MODE=off: doing nothing"
            v = get(b"CUDAFIX_MODE")
            if v is None or v.strip().lower() != b"off":
                # path: the start's sys.path (the cache entry must not depend on the script's dir)
                sys.meta_path.insert(0, type(sys.implementation)(cudafix=True, find_spec=_find_spec, path=sys.path[:]))
                msg = "finder installed: the check runs at `import torch`"
        if sys.prefix != sys.base_prefix and sys.version_info < (3, 15):  # a venv: see _skip_second_pass
            _skip_second_pass(sys.modules.get("site"), sys._getframe(1).f_locals.get("sitedir"))
        v = get(b"CUDAFIX_DEBUG")
        if v is not None and v.lower() not in no:
            sys.stderr.write("cudafix: " + msg + "\n")
    except Exception:  # noqa: BLE001 - never break an interpreter
        pass


# In a venv, site.py (3.8 to 3.14) processes site-packages' .pth files twice (CPython issue 75723):
# from venv(), then again from main().  The second time, cudafix.pth would be read and compiled
# again only to find the hook started (~0.19 M instructions, a fifth of the hook's cost at start:
# docs/benchmarks.md).  So site.addpackage skips that one file of that one directory once, then is
# site's own again; every other .pth file goes through unchanged.  sitedir: that of the .pth line
# that called run() (a local of site.addpackage), None when run() was called otherwise.
# (Comments, not a docstring: every byte of this module is unmarshalled at every start.)
def _skip_second_pass(site, sitedir):
    orig = getattr(site, "addpackage", None)
    if orig is None or not isinstance(sitedir, str):
        return

    def addpackage(d, name, known_paths):
        if name == "cudafix.pth" and d == sitedir:
            site.addpackage = orig
            return known_paths
        return orig(d, name, known_paths)

    site.addpackage = addpackage


def _find_spec(name, path=None, target=None):  # the finder's: the work is cudafix.hook.runtime.on_torch
    if name == "torch":
        import os
        import sys

        try:
            from cudafix.hook import runtime as hookenv

            hookenv.on_torch(sys._getframe(1))
        except Exception as exc:  # noqa: BLE001 - torch's import proceeds whatever happens
            try:
                v = os.environ.get("CUDAFIX_DEBUG")
                if v and v.lower() not in ("0", "no", "false", "off"):  # e.g. the package is gone
                    sys.stderr.write("cudafix: at `import torch`: %s: %s\n" % (type(exc).__name__, exc))
            except Exception:  # noqa: BLE001
                pass
