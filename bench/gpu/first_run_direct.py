"""Direct measurement of each first-run cause, for comparison with `cudafix verify --first-run`.

Independent of cudafix's attribution code: its own small program (the same detector workload,
imported from cudafix/verify/firstrun_child.py's build_detector) is timed with its own timers in
fresh processes with the cause present and absent, REPS times; a cause's direct cost is
min(present) - min(absent) over the repeats, and every raw run is kept.

  cudnn-benchmark   first iteration, cudnn.benchmark True minus False (each image size), the True run on a
                    JIT cache that already holds the tuning's kernels (a second run on its own cache)
  cudnn-benchmark-jit  first iteration with cudnn.benchmark True, its own empty JIT cache minus that cache
                    once filled (the kernels the tuning tries are JIT-compiled once per cache)
  eager             context + set-up + first iteration, CUDA_MODULE_LOADING=EAGER minus unset
  compile           context + set-up + first iteration, torch.compile (fresh inductor cache) minus none;
                    and with the inductor cache of that run kept
  ext-jit           first call of the PTX-only extension (program.py's own timer), empty minus warm JIT cache

Usage: python3 bench/gpu/first_run_direct.py OUT.json PROGRAM_DIR [REPS] [SIZES] [GROUPS]  (PROGRAM_DIR holds
program.py and cfx_ptx75.py + libcfx_ptx75.so; GROUPS, comma-separated, picks of benchmark,eager,compile,ext:
all by default; the default case always runs, it is every difference's baseline)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHILD_DIR = os.path.join(ROOT, "cudafix", "verify")

# DIRECT_CHILD_WORKLOAD=1: seed the weights and allocate the second (4:3) input before the first
# iteration, as verify's child does (the 2026-12-01 320-pixel pairs differed in the tuned first
# iteration alone); unset, as every earlier recording ran
SECOND = os.environ.get("DIRECT_CHILD_WORKLOAD") == "1"

CODE = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
sys.path.insert(0, %(child_dir)r)
from firstrun_child import build_detector
torch.backends.cudnn.benchmark = %(bench)s
t = time.perf_counter()
torch.ones(1, device="cuda"); torch.cuda.synchronize()
ctx = time.perf_counter() - t
t = time.perf_counter()
if %(second)s:
    torch.manual_seed(0)
m = build_detector(torch).to("cuda", torch.float16).eval()
if %(compile)s:
    m = torch.compile(m)
x = torch.randn(%(batch)d, 3, %(size)d, %(size)d, device="cuda", dtype=torch.float16)
if %(second)s:
    x2 = torch.randn(%(batch)d, 3, max(32, (%(size)d * 3 // 4) // 32 * 32), %(size)d, device="cuda", dtype=torch.float16)
torch.cuda.synchronize()
setup = time.perf_counter() - t
with torch.inference_mode():
    t = time.perf_counter(); m(x); torch.cuda.synchronize(); first = time.perf_counter() - t
    t = time.perf_counter(); m(x); torch.cuda.synchronize(); second = time.perf_counter() - t
print(json.dumps({"import_s": t1 - t0, "context_s": ctx, "setup_s": setup, "first_iter_s": first, "second_iter_s": second,
                  "to_first_s": ctx + setup + first}))
"""


def run(code_args, env_update, timeout=300):
    env = dict(os.environ, CUDAFIX_DISABLE="1", PYTHONUNBUFFERED="1")
    for k, v in env_update.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    t = time.perf_counter()
    if isinstance(code_args, str):
        argv = [sys.executable, "-c", code_args]
    else:
        argv = [sys.executable] + list(code_args)
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=timeout)
    lines = [ln for ln in p.stdout.decode(errors="replace").splitlines() if ln.startswith("{")]
    out = json.loads(lines[-1]) if lines else {"error": p.stderr.decode(errors="replace")[-800:]}
    out["process_s"] = round(time.perf_counter() - t, 4)
    out["rc"] = p.returncode
    return out


def main():
    out_path, prog_dir = sys.argv[1], sys.argv[2]
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    sizes = [int(s) for s in (sys.argv[4] if len(sys.argv) > 4 else "640,320").split(",")]
    groups = set((sys.argv[5] if len(sys.argv) > 5 else "benchmark,eager,compile,ext").split(","))
    tmp = tempfile.mkdtemp(prefix="cfx-direct-")
    jit = os.path.join(tmp, "jit")  # torch's kernels are SASS here: one shared JIT cache for the model cases
    base = {"CUDA_CACHE_PATH": jit, "CUDA_MODULE_LOADING": None}
    runs = []

    def save():  # after every run: a run cut at its time limit keeps what it measured
        def mn(case, key, size=None):
            v = [r[key] for r in runs if r["case"] == case and (size is None or r.get("size") == size) and key in r]
            return min(v) if v else None

        def d(a, b):
            return None if a is None or b is None else round(a - b, 4)

        direct = {}
        for size in sizes:
            direct["cudnn-benchmark@%d" % size] = d(mn("benchmark", "first_iter_s", size), mn("default", "first_iter_s", size))
            direct["cudnn-benchmark-jit@%d" % size] = d(mn("benchmark-cold", "first_iter_s", size),
                                                        mn("benchmark", "first_iter_s", size))
        direct["module-loading-eager@%d" % sizes[0]] = d(mn("eager", "to_first_s"), mn("default", "to_first_s", sizes[0]))
        direct["torch-compile@%d" % sizes[0]] = d(mn("compile-fresh", "to_first_s"), mn("default", "to_first_s", sizes[0]))
        direct["torch-compile-kept@%d" % sizes[0]] = d(mn("compile-kept", "to_first_s"), mn("default", "to_first_s", sizes[0]))
        direct["ext-jit"] = d(mn("ext-cold", "first_call_s"), mn("ext-warm", "first_call_s"))
        doc = {"reps": reps, "sizes": sizes, "batch": 8, "dtype": "fp16", "direct_s": direct, "runs": runs}
        with open(out_path, "w") as fh:
            json.dump(doc, fh, indent=1)
        return direct

    def model(case, rep, size, bench=False, comp=False, extra=None):
        code = CODE % {"child_dir": CHILD_DIR, "bench": bench, "compile": comp, "batch": 8, "size": size,
                       "second": SECOND}
        env = dict(base, **(extra or {}))
        r = run(code, env)
        r.update(case=case, rep=rep, size=size)
        runs.append(r)
        save()
        print(case, rep, size, {k: round(v, 3) for k, v in r.items() if isinstance(v, float)}, r.get("error", "")[-200:], flush=True)
        if "error" in r and case == "default":
            with open(out_path, "w") as fh:
                json.dump({"error": r["error"], "runs": runs}, fh, indent=1)
            sys.exit("the default case failed: stopping")

    for rep in range(reps):
        ind = os.path.join(tmp, "inductor%d" % rep)
        for size in sizes:
            model("default", rep, size)
            if "benchmark" not in groups:
                continue
            bjit = {"CUDA_CACHE_PATH": os.path.join(tmp, "benchjit%d-%d" % (rep, size))}
            model("benchmark-cold", rep, size, bench=True, extra=bjit)
            model("benchmark", rep, size, bench=True, extra=bjit)
        if "eager" in groups:
            model("eager", rep, sizes[0], extra={"CUDA_MODULE_LOADING": "EAGER"})
        cenv = {"TORCHINDUCTOR_CACHE_DIR": ind, "TRITON_CACHE_DIR": os.path.join(ind, "triton")}
        if "compile" in groups:
            model("compile-fresh", rep, sizes[0], comp=True, extra=cenv)
            model("compile-kept", rep, sizes[0], comp=True, extra=cenv)
        if "ext" not in groups:
            continue
        ejit = os.path.join(tmp, "extjit%d" % rep)
        penv = {"CUDA_CACHE_PATH": ejit, "CUDA_MODULE_LOADING": None, "PYTHONPATH": prog_dir}
        for case in ("ext-cold", "ext-warm"):
            r = run([os.path.join(prog_dir, "program.py")], penv)
            r.update(case=case, rep=rep)
            runs.append(r)
            save()
            print(case, rep, r, flush=True)

    print(json.dumps(save()))


if __name__ == "__main__":
    main()
