"""Where one warm `cudafix status --json` spends its time, without a profiler: the import of
cudafix.probes, of the analysis module, and the run, with each probe's own time (every
take_snapshot probe runs inside probes.sections._guard, which is wrapped to time it; the machine
probes run under their own guard in probes/machine/machine.py).  Run it as a fresh
process per measurement, with the interpreter of the env to inspect and cudafix on PYTHONPATH:

    PYTHONPATH=<dir holding cudafix/> <env>/bin/python bench/status_phases.py

Used for docs/gpu-raw/h200-status-phases-2329.txt (docs/benchmarks.md, issue 23)."""
import sys, time
T0 = time.perf_counter()
import cudafix.probes.sections as P
orig = P._guard
times = {}
def g(snap, name, fn):
    t = time.perf_counter()
    try:
        return orig(snap, name, fn)
    finally:
        times[name] = times.get(name, 0) + time.perf_counter() - t
P._guard = g
T1 = time.perf_counter()
from cudafix.cli import analysis  # noqa
T2 = time.perf_counter()
import io, contextlib
buf = io.StringIO()
from cudafix.cli import fast
with contextlib.redirect_stdout(buf):
    try:
        fast.fast_main(["status", "--json"])
    except SystemExit:
        pass
T3 = time.perf_counter()
print("import probes %.1f ms, analysis %.1f ms, run %.1f ms" % ((T1-T0)*1e3, (T2-T1)*1e3, (T3-T2)*1e3))
print("  " + ", ".join("%s %.1f" % (k, v*1e3) for k, v in sorted(times.items(), key=lambda kv: -kv[1])))
