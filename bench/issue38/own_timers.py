"""The direct measurement for issue 38: bench/issue38/prog.py in fresh processes, k interleaved rounds of
(empty JIT cache, the same cache again), its own timers.  Usage:

    python3 bench/issue38/own_timers.py OUT.json K -- PYTHON PROG.py

Each round gets a new empty CUDA_CACHE_PATH (and inductor/Triton caches, as verify's cold run);
the empty run fills it, the warm run reuses it.  direct_s: per figure, min over the empty runs
minus min over the warm runs (the same arithmetic verify uses, on the program's own timers):
ext-jit (the module's first call), cudnn-jit (the first forward), whole (the process wall).
Stdlib only; Python 3.8 compatible.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def run(cmd, cache):
    env = dict(os.environ, CUDA_CACHE_PATH=os.path.join(cache, "jit"),
               TORCHINDUCTOR_CACHE_DIR=os.path.join(cache, "ind"), TRITON_CACHE_DIR=os.path.join(cache, "ind", "triton"))
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t
    lines = [ln for ln in p.stdout.decode(errors="replace").splitlines() if ln.startswith("{")]
    rec = json.loads(lines[-1]) if lines else {"error": p.stderr.decode(errors="replace")[-500:]}
    rec.update(rc=p.returncode, wall_s=round(wall, 4))
    return rec


def main():
    out_path, k = sys.argv[1], int(sys.argv[2])
    cmd = sys.argv[sys.argv.index("--") + 1:]
    runs = []
    base = tempfile.mkdtemp(prefix="issue38-own-")
    try:
        for r in range(k):
            cache = os.path.join(base, "r%d" % r)
            for case in ("empty", "warm"):
                rec = run(cmd, cache)
                rec.update(case=case, round=r)
                runs.append(rec)
                print("round %d %-5s wall %.2f s  %s" % (r, case, rec["wall_s"], {x: rec.get(x) for x in (
                    "import_s", "ext_first_s", "fwd_first_s", "total_s")}), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)

    def best(case, key):
        vals = [x[key] for x in runs if x["case"] == case and isinstance(x.get(key), (int, float))]
        return (min(vals), max(vals) - min(vals)) if vals else (None, None)

    direct, spread = {}, {}
    for name, key in (("ext-jit", "ext_first_s"), ("cudnn-jit", "fwd_first_s"), ("whole", "wall_s"),
                      ("whole-inside", "total_s")):
        (e, se), (w, sw) = best("empty", key), best("warm", key)
        direct[name] = None if e is None or w is None else round(e - w, 4)
        spread[name] = None if se is None or sw is None else round(max(se, sw), 4)
    rep = {"schema": "cudafix.bench.issue38-own/1", "k": k, "command": cmd, "direct_s": direct,
           "spread_s": spread, "runs": runs}
    with open(out_path, "w") as fh:
        json.dump(rep, fh, indent=1)
    print("direct_s", json.dumps(direct), "spread_s", json.dumps(spread))
    return 0 if all(x.get("rc") == 0 for x in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
