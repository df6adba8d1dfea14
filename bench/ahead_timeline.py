#!/usr/bin/env python3
"""Where the sections that run ahead (cudafix/probes/ahead.py) spend a `cudafix status --json`.

Runs `status --json` in this process N times (a fresh process each: this script re-runs itself)
with cudafix.probes.ahead's fork and join timed: when each child started (ms since this
process's first line), how long its probe took in the child, when the parent asked for the
answer and how long it waited for it, and when the command ended.  A parent that never waits
has the children's work off its path.

    python3 bench/ahead_timeline.py [-n 5] [--always] [--cold]   (with the python of the env to measure)

--always forks every section wherever it would not pay (ahead.start(always=True)); --cold gives
every run an empty cache ($XDG_CACHE_HOME).  Each run also prints its process's wall time as
this script measured it (spawn to exit) beside `python -c pass` spawned the same way: what the
process spends beyond the command's end is the interpreter's start and exit.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

T0 = time.perf_counter()


def one(always: bool) -> None:
    from cudafix import forks as _forks
    from cudafix.probes import ahead

    real_fork, real_answer, real_start = _forks.fork, ahead.Started.answer, ahead.start
    forks = []

    def fork(work, **kw):  # type: ignore[no-untyped-def]
        k = len(forks)

        def timed():  # type: ignore[no-untyped-def]
            began = time.perf_counter()
            try:
                return work()
            finally:
                os.write(2, ("  child #%d     started %6.1f ms, sections %6.1f ms\n"
                             % (k, (began - T0) * 1e3, (time.perf_counter() - began) * 1e3)).encode())

        began = time.perf_counter()
        child = real_fork(timed, **kw)
        forks.append(["#%d" % k, (time.perf_counter() - began) * 1e3])
        return child

    def start(req, **kw):  # type: ignore[no-untyped-def]
        if always:
            kw["always"] = True
        started = real_start(req, **kw)
        for entry, name in zip(forks, started.children if started else ()):
            entry[0] = "%s (%s)" % (name, entry[0])
        return started

    def answer(self, section):  # type: ignore[no-untyped-def]
        began = time.perf_counter()
        got = real_answer(self, section)
        os.write(2, ("  parent took %-10s at %6.1f ms, waited %5.1f ms%s\n"
                     % (section, (began - T0) * 1e3, (time.perf_counter() - began) * 1e3,
                        "" if got else ": NO ANSWER (run here)")).encode())
        return got

    _forks.fork, ahead.Started.answer, ahead.start = fork, answer, start
    from cudafix.cli import fast

    devnull = os.open(os.devnull, os.O_WRONLY)
    saved = os.dup(1)
    os.dup2(devnull, 1)
    try:
        rc = fast.fast_main(["status", "--json"])
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
    os.write(2, ("  forks: %s; exit %s; command ended at %.1f ms\n"
                 % (", ".join("%s %.2f ms" % (n, ms) for n, ms in forks) or "none", rc, (time.perf_counter() - T0) * 1e3)).encode())
    # what the process's exit waits for: the children that answered but had not yet exited
    real_reap_all = ahead.reap_all

    def reap_all():  # type: ignore[no-untyped-def]
        began, n = time.perf_counter(), len(_forks._PENDING)
        real_reap_all()
        os.write(2, ("  at exit: waited %.1f ms for %d children\n" % ((time.perf_counter() - began) * 1e3, n)).encode())

    import atexit

    atexit.unregister(real_reap_all)
    atexit.register(reap_all)
    import gc

    gc.freeze()  # as cudafix.cli.run does before the process ends


def main(argv: list) -> int:
    if argv[:1] == ["--child"]:
        one("--always" in argv)
        return 0
    import tempfile

    n = int(argv[argv.index("-n") + 1]) if "-n" in argv else 5
    always = ["--always"] if "--always" in argv else []
    cold = "--cold" in argv
    print("ahead_timeline: %s, %d runs%s%s" % (sys.executable, n, ", both jobs forked" if always else "",
                                                ", each with an empty cache" if cold else ""), flush=True)
    for i in range(n + 1):  # the first: untimed (it fills the caches)
        env = dict(os.environ, XDG_CACHE_HOME=tempfile.mkdtemp(prefix="timeline-")) if cold else None
        began = time.perf_counter()
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child"] + always, capture_output=True, text=True,
                           env=env)
        wall = time.perf_counter() - began
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"])
        floor = time.perf_counter() - began
        if i:
            sys.stdout.write("run %d\n%s  process wall %.1f ms (python -c pass %.1f ms)\n" % (i, p.stderr, wall * 1e3, floor * 1e3))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
