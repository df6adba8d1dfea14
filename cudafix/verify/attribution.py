"""`cudafix verify --first-run`: the attribution arithmetic, pure over recorded child outputs.

Each first-run cause is the difference between two fresh processes that differ in that one
switch, measured (never guessed).  Each variant may run several times (`--repeat`); per metric we
take the minimum over the repeats, because an unrelated stall (page cache, a busy CPU) only ever
adds time.  A difference counts as a cost when it is larger than NOISE_S and NOISE_FRACTION of the
reference it is measured against: below that, two fresh processes differ by that much anyway.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence

NOISE_S = 0.25
NOISE_FRACTION = 0.15

HEALTHY = "no first-run cost"
DEGRADED = "first-run cost"
EXIT_CODES = {HEALTHY: 0, DEGRADED: 1}

FIX_WARM = "`cudafix warm` (and a JIT cache big enough to keep its output: `cudafix status` says)"
FIX_BENCHMARK = "`torch.backends.cudnn.benchmark = False` in the program, or fixed input shapes (every new shape is tuned again)"
FIX_BENCHMARK_JIT = ("keep the JIT cache between runs (CUDA_CACHE_PATH on a disk that survives, big enough: `cudafix status` "
                     "says), or `torch.backends.cudnn.benchmark = False`")
FIX_COMPILE = ("keep TORCHINDUCTOR_CACHE_DIR (and TRITON_CACHE_DIR) on a disk that survives between runs, "
               "or leave torch.compile off for short runs")
FIX_LAZY = "`unset CUDA_MODULE_LOADING` (lazy loading is the default on Linux since CUDA 12.2; torch sets LAZY itself since 1.13)"


def best(runs: Sequence[Dict[str, Any]], key: str) -> Optional[float]:
    vals = [r[key] for r in runs if isinstance(r.get(key), (int, float))]
    return min(vals) if vals else None


def to_first(run: Dict[str, Any]) -> Optional[float]:
    """Seconds from after `import torch` to the first result: CUDA init (`torch.cuda.is_available()`)
    + load + context + model set-up + first iteration (init_s is absent from recordings made before
    it was timed: 0 there)."""
    parts = [run.get(k) for k in ("context_s", "setup_s", "first_iter_s")]
    if any(not isinstance(p, (int, float)) for p in parts):
        return None
    return float(sum(parts)) + float(run.get("load_s") or 0.0) + float(run.get("init_s") or 0.0)  # type: ignore[arg-type]


def context(run: Dict[str, Any]) -> Optional[float]:
    """CUDA init + context creation, as the user's program pays them before its first kernel."""
    c = run.get("context_s")
    return None if not isinstance(c, (int, float)) else round(float(c) + float(run.get("init_s") or 0.0), 4)


def best_by(runs: Sequence[Dict[str, Any]], fn: Callable[[Dict[str, Any]], Optional[float]]) -> Optional[float]:
    """The minimum of ``fn`` over the runs that have it (None when none does)."""
    vals = [v for v in (fn(r) for r in runs) if v is not None]
    return min(vals) if vals else None


def best_to_first(runs: Sequence[Dict[str, Any]]) -> Optional[float]:
    return best_by(runs, to_first)


def significant(seconds: Optional[float], reference: Optional[float]) -> bool:
    if seconds is None:
        return False
    return seconds > max(NOISE_S, NOISE_FRACTION * (reference or 0.0))


def _diff(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return None if a is None or b is None else round(a - b, 4)


def _cause(cid: str, name: str, seconds: Optional[float], reference: Optional[float], fix: str,
           in_env: Optional[bool], how: str, **extra: Any) -> Dict[str, Any]:
    c = {"id": cid, "name": name, "seconds": seconds, "significant": significant(seconds, reference),
         "in_env": in_env, "fix": fix, "measured_as": how}
    c.update(extra)
    return c


def attribute(variants: Dict[str, List[Dict[str, Any]]], env_loading: str = "",
              modules: Sequence[str] = ()) -> Dict[str, Any]:
    """Variants (name -> child outputs, one per repeat) -> the breakdown.

    Names: cold (fresh JIT cache), warm (the same cache again), benchmark (cudnn.benchmark on, the
    same cache), benchmark-warm (benchmark again on that cache: the tuning's kernels kept there),
    loading (CUDA_MODULE_LOADING flipped from the env's), compile-fresh / compile-kept (torch.compile
    with an empty / the kept inductor cache), modules-cold / modules-warm (the env's PTX-only
    extension modules loaded eagerly with a fresh / warm JIT cache).
    """
    warm = variants.get("warm", [])
    causes: List[Dict[str, Any]] = []
    base_first = best_to_first(warm)
    cold = variants.get("cold", [])
    growth = max([r.get("jit_cache_growth_bytes") or 0 for r in cold] or [0])
    jit_s = _diff(best_to_first(cold), base_first)
    jit = _cause("ptx-jit", "PTX JIT of the kernels the model runs", jit_s, base_first, FIX_WARM,
                 growth > 0, "cold minus warm JIT cache (CUDA_CACHE_PATH), context + set-up + first iteration",
                 jit_cache_growth_bytes=growth)
    jit["significant"] = jit["significant"] and growth > 0  # no JIT output written: the difference is noise
    causes.append(jit)
    if variants.get("modules-cold"):
        mc, mw = variants["modules-cold"], variants.get("modules-warm", [])
        mg = max([r.get("jit_cache_growth_bytes") or 0 for r in mc] or [0])
        ms = _diff(best(mc, "context_s"), best(mw, "context_s"))
        c = _cause("ext-jit", "PTX JIT of %s" % ", ".join(modules) if modules else "PTX JIT of the env's extension modules",
                   ms, best(mw, "context_s"), FIX_WARM, True,
                   "the modules loaded eagerly, cold minus warm JIT cache", jit_cache_growth_bytes=mg, modules=list(modules))
        c["significant"] = c["significant"] and mg > 0
        causes.append(c)
    bench, bench_warm = variants.get("benchmark", []), variants.get("benchmark-warm", [])
    if bench:
        # the tuning tries kernels the default path never runs; on the H200 (torch 2.11, cuDNN 9) they
        # are JIT-compiled on the first tuning run and kept in the JIT cache (484,863 bytes there), so
        # the tuning itself is measured on a cache that already holds them, and the JIT apart
        tuned = bench_warm or bench
        causes.append(_cause("cudnn-benchmark", "cuDNN autotuning (torch.backends.cudnn.benchmark = True)",
                             _diff(best(tuned, "first_iter_s"), best(warm, "first_iter_s")), best(warm, "first_iter_s"),
                             FIX_BENCHMARK, None,
                             "first iteration, benchmark on minus off" + (
                                 ", the JIT cache already holding the tuning's kernels" if bench_warm else ""),
                             new_shape_seconds=_diff(best(tuned, "shape2_first_s"), best(warm, "shape2_first_s"))))
    if bench and bench_warm:
        bg = max([r.get("jit_cache_growth_bytes") or 0 for r in bench] or [0])
        c = _cause("cudnn-benchmark-jit", "JIT compilation of the kernels cuDNN's autotuning tries (once per JIT cache)",
                   _diff(best(bench, "first_iter_s"), best(bench_warm, "first_iter_s")), best(bench_warm, "first_iter_s"),
                   FIX_BENCHMARK_JIT, None, "first iteration with benchmark on, the tuning's kernels not yet in the "
                   "JIT cache minus already there", jit_cache_growth_bytes=bg)
        c["significant"] = c["significant"] and bg > 0
        causes.append(c)
    load = variants.get("loading", [])
    if load:
        eager_env = env_loading.upper() == "EAGER"
        lazy_first, eager_first = (best_to_first(load), base_first) if eager_env else (base_first, best_to_first(load))
        causes.append(_cause("module-loading-eager", "CUDA_MODULE_LOADING=EAGER (every kernel of every library loaded at start)",
                             _diff(eager_first, lazy_first), lazy_first, FIX_LAZY, eager_env,
                             "context + set-up + first iteration, EAGER minus LAZY"))
    cf, ck = variants.get("compile-fresh", []), variants.get("compile-kept", [])
    errors = [r["compile_error"] for r in cf + ck if r.get("compile_error")]
    if cf or ck:
        if errors:
            causes.append({"id": "torch-compile", "name": "torch.compile (inductor)", "seconds": None, "significant": False,
                           "in_env": None, "fix": FIX_COMPILE, "measured_as": "not measured", "error": errors[0]})
        else:
            ref = base_first
            fresh = _diff(best_to_first(cf), ref)
            kept = _diff(best_to_first(ck), ref)
            causes.append(_cause("torch-compile", "torch.compile with an empty inductor cache", fresh, ref, FIX_COMPILE, None,
                                 "context + set-up + first iteration, compiled (fresh TORCHINDUCTOR_CACHE_DIR) minus eager mode",
                                 kept_cache_seconds=kept, saved_by_kept_cache=_diff(fresh, kept),
                                 new_shape_seconds=_diff(best(cf, "shape2_first_s"), best(warm, "shape2_first_s"))))
    env_costs = [c for c in causes if c["in_env"] and c["significant"]]
    return {
        "verdict": DEGRADED if env_costs else HEALTHY,
        "context_s": best_by(warm, context),
        "setup_s": best(warm, "setup_s"),
        "first_iter_s": best(warm, "first_iter_s"),
        "to_first_s": base_first,
        "steady_ms": best(warm, "steady_ms"),
        "shape2_steady_ms": best(warm, "shape2_steady_ms"),
        "import_torch_s": best(warm, "import_torch_s"),
        "causes": causes,
        "env_causes": [c["id"] for c in env_costs],
    }


def _s(v: Optional[float]) -> str:
    return "n/a" if v is None else "%.2f s" % v


def render(rep: Dict[str, Any]) -> List[str]:
    """The text report of a built-in model run (rep: attribute()'s dict + "config")."""
    cfg = rep.get("config", {})
    out = ["cudafix verify --first-run: %s" % (
        "no first-run cost beyond context creation (%s)" % _s(rep["context_s"]) if rep["verdict"] == HEALTHY
        else "first-run cost in this env: %s" % ", ".join(rep["env_causes"]))]
    out.append("model: YOLO-shaped detector, batch %s, %sx%s, %s; %s" % (
        cfg.get("batch"), cfg.get("imgsz"), cfg.get("imgsz"), "fp16" if cfg.get("half") else "fp32", cfg.get("device", "")))
    out.append("context creation %s, model set-up %s, first iteration %s, then %s ms per iteration" % (
        _s(rep["context_s"]), _s(rep["setup_s"]), _s(rep["first_iter_s"]),
        "n/a" if rep["steady_ms"] is None else "%.2f" % rep["steady_ms"]))
    for c in rep["causes"]:
        if c["seconds"] is None:
            out.append("  %-22s not measured%s" % (c["id"], ": " + c["error"] if c.get("error") else ""))
            continue
        tag = "in this env" if c["in_env"] else ("not in this env" if c["in_env"] is False else "if your program does it")
        if not c["significant"]:
            out.append("  %-22s %+6.2f s  within noise (no cost)  [%s]" % (c["id"], c["seconds"], tag))
            continue
        line = "  %-22s %+6.2f s  %s  [%s]" % (c["id"], c["seconds"], c["name"], tag)
        if c.get("new_shape_seconds") is not None:
            line += "; %+.2f s again at a new input shape" % c["new_shape_seconds"]
        if c.get("kept_cache_seconds") is not None:
            line += "; %+.2f s with the inductor cache kept" % c["kept_cache_seconds"]
        out.append(line)
        out.append("  %-22s fix: %s" % ("", c["fix"]))
    return out
