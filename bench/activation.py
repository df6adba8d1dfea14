"""Cost of cudafix's conda activation script, warm and cold, against sourcing an empty script.

For each shell: one shell process sources, N times in a loop, (a) an empty script (the
baseline), (b) activate.d/cudafix.<ext> with a fresh cache (warm: builtins only), and
(c) the same script with a cache miss forced each time by a new value of a key variable
(cold: the env's python probes, runs the rules and writes the cache).  Each activation is
followed by the deactivation script, so every iteration does the same work.  Per-source cost =
(loop time - empty-loop time) / N, all measured in this run.  Then strace counts the execve
calls of one warm activation (the goal: none besides the shell itself).

The env is a fake conda prefix (tests/conda_replay.py) whose python runs the real probes and
rules of this checkout on this machine.

  python3 bench/activation.py [--n 200] [--cold-n 10] [--shells bash,dash,zsh,ash,fish,tcsh]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests import conda_replay as cr  # noqa: E402

LOOP = {
    "sh": "i=0\nwhile [ $i -lt {n} ]; do\n{body}i=$((i+1))\ndone\n",
    "fish": "for i in (seq {n})\n{body}end\n",
    "csh": "@ i = 0\nwhile ( $i < {n} )\n{body}@ i++\nend\n",
}


def _src(fam: str, path: pathlib.Path) -> str:
    return cr.SOURCE[fam] % cr.QUOTE[fam](str(path)) + "\n"


def _export(fam: str, name: str, expr: str) -> str:
    return {"sh": "export %s=%s\n", "fish": "set -gx %s %s\n", "csh": "setenv %s %s\n"}[fam] % (name, expr)


def _counter(fam: str) -> str:
    return {"sh": '"/x$i"', "fish": '"/x$i"', "csh": '"/x$i"'}[fam]


def run_loop(shell: str, body: str, n: int, env, cwd) -> float:
    fam = cr.SHELLS[shell][1]
    script = LOOP[fam].format(n=n, body=body)
    f = pathlib.Path(cwd) / ("bench." + fam)
    f.write_text(script)
    t = time.perf_counter()
    p = subprocess.run(cr.SHELLS[shell][0] + [str(f)], env=env, cwd=cwd, capture_output=True)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit("%s failed: %s" % (shell, p.stderr.decode(errors="replace")))
    return dt


def count_execve(shell: str, body: str, env, cwd) -> int:
    if not shutil.which("strace"):
        return -1
    fam = cr.SHELLS[shell][1]
    f = pathlib.Path(cwd) / ("once." + fam)
    f.write_text(body)
    log = pathlib.Path(cwd) / "strace.log"
    subprocess.run(["strace", "-f", "-qq", "-e", "trace=execve", "-o", str(log)] + cr.SHELLS[shell][0] + [str(f)],
                   env=env, cwd=cwd, capture_output=True, check=True)
    calls = [ln for ln in log.read_text().splitlines() if "execve(" in ln and "= -1" not in ln]
    return len(calls) - 1  # the shell itself


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--cold-n", type=int, default=10)
    ap.add_argument("--shells", default="bash,dash,zsh,ash,fish,tcsh")
    a = ap.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="cudafix-bench-"))
    prefix = cr.make_prefix(tmp / "bench env", other_scripts=False)
    old = time.time() - 30
    for p in [prefix / "conda-meta"] + list((prefix / "lib").glob("python*/site-packages")):
        os.utime(p, (old, old))
    home = tmp / "home"
    home.mkdir()
    empty = tmp / "empty"
    empty.write_text("")
    base = cr.base_env(home, {"CUDA_HOME": "/usr/local/cuda"})
    base.update({"CONDA_PREFIX": str(prefix), "PATH": str(prefix / "bin") + ":" + base["PATH"]})
    print("cudafix activation benchmark: %s, n=%d warm, %d cold, per source (loop minus empty loop)" % (
        sys.platform, a.n, a.cold_n))
    print("%-6s %12s %14s %14s %10s %14s" % ("shell", "empty (ms)", "warm (ms)", "cold (ms)", "warm/empty", "warm execve"))
    for shell in a.shells.split(","):
        if not cr.available(shell):
            print("%-6s missing" % shell)
            continue
        fam = cr.SHELLS[shell][1]
        act = _src(fam, prefix / "etc/conda/activate.d" / ("cudafix." + fam))
        deact = _src(fam, prefix / "etc/conda/deactivate.d" / ("cudafix." + fam))
        cwd = str(tmp)
        # prime the cache (one cold run), then measure
        run_loop(shell, act + deact, 1, base, cwd)
        t_empty = run_loop(shell, _src(fam, empty) * 2, a.n, base, cwd)
        t_zero = run_loop(shell, "", a.n, base, cwd)
        t_warm = run_loop(shell, act + deact, a.n, base, cwd)
        execs = count_execve(shell, act, base, cwd)  # before the cold loop re-keys the cache
        t_cold = run_loop(shell, _export(fam, "CUDA_HOME", _counter(fam)) + act + deact, a.cold_n, base, cwd)
        t_cold0 = run_loop(shell, _export(fam, "CUDA_HOME", _counter(fam)), a.cold_n, base, cwd)
        empty_ms = (t_empty - t_zero) / a.n / 2 * 1e3
        warm_ms = (t_warm - t_zero) / a.n * 1e3
        cold_ms = (t_cold - t_cold0) / a.cold_n * 1e3
        print("%-6s %12.3f %14.3f %14.1f %10.1f %14d" % (shell, empty_ms, warm_ms, cold_ms, warm_ms / empty_ms if empty_ms > 0 else float("nan"), execs))
    if not os.environ.get("CUDAFIX_BENCH_KEEP"):
        shutil.rmtree(str(tmp), ignore_errors=True)
    else:
        print("kept", tmp)


if __name__ == "__main__":
    main()
