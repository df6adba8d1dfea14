"""`verify --first-run -- CMD`: the attribution arithmetic over the whole command's wall times.

Each case ran k times, interleaved (round 1: every case once, round 2: ...), so a slow stretch of
the machine lands on all cases alike.  A cost is the difference of the two cases' minima (an
unrelated stall only ever adds time); its noise is measured in the same check: how far each case's
next-best run is from its minimum (the minimum's own uncertainty), the larger of the two; the cost
counts only above it.  The full spread (max - min over the k runs) is shown beside it.  A cause the
command cannot have (no JIT output written, no inductor cache touched, the flag never set) is "not
used", never a number: cudafix/verify/cmdprobe.py says what the command's Python processes did.
Pure functions: cudafix/verify/cmdrun.py runs the cases.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from cudafix.verify import attribution

COST, NOISE, NOT_USED, USED, UNKNOWN = "cost", "within noise", "not used", "used, not measured", "unknown"

FIX_KEEP_JIT = ("keep the driver's JIT cache between runs: CUDA_CACHE_PATH on a disk that survives (not a "
                "container's writable layer or a tmpfs), CUDA_CACHE_MAXSIZE big enough (`cudafix status` says)")
FIX_BENCHMARK_JIT = FIX_KEEP_JIT + "; or `torch.backends.cudnn.benchmark = False`"
FIX_REBUILD = "rebuild it with SASS for this GPU (TORCH_CUDA_ARCH_LIST naming its compute capability)"


def stats(vals: Sequence[float]) -> Optional[Dict[str, Any]]:
    """min, max, spread (max - min) and the minimum's own uncertainty: how far the next-best run is
    from it (``min_gap_s``; the whole spread with two runs).  One stalled run widens the spread but
    not the gap, and it is the minima that are compared."""
    if not vals:
        return None
    s = sorted(vals)
    return {"min_s": round(s[0], 4), "max_s": round(s[-1], 4), "spread_s": round(s[-1] - s[0], 4),
            "min_gap_s": round(s[1] - s[0], 4) if len(s) > 1 else None, "n": len(s)}


def compare(walls: Dict[str, List[float]], a: str, b: str) -> Dict[str, Any]:
    """Case ``a`` minus case ``b``: seconds (difference of the minima); noise, the larger of the two
    minima's uncertainties (stats' min_gap_s); significant above it (never with fewer than two runs
    of each); spread, the larger of the two cases' spreads, shown beside it."""
    sa, sb = stats(walls.get(a, [])), stats(walls.get(b, []))
    if sa is None or sb is None:
        return {"seconds": None, "noise_s": None, "significant": False, "status": UNKNOWN}
    sec = round(sa["min_s"] - sb["min_s"], 4)
    if min(sa["n"], sb["n"]) < 2:
        return {"seconds": sec, "noise_s": None, "spread_s": None, "significant": False, "status": UNKNOWN, "cases": [a, b]}
    noise = max(sa["min_gap_s"], sb["min_gap_s"])
    sig = sec > noise
    return {"seconds": sec, "noise_s": round(noise, 4), "spread_s": round(max(sa["spread_s"], sb["spread_s"]), 4),
            "significant": sig, "status": COST if sig else NOISE, "cases": [a, b]}


def _cause(cid: str, name: str, fix: str, in_env: Optional[bool], how: str, m: Dict[str, Any], **extra: Any) -> Dict[str, Any]:
    c = {"id": cid, "name": name, "fix": fix, "in_env": in_env, "measured_as": how}
    c.update(m)
    c.update(extra)
    return c


def _unmeasured(cid: str, name: str, status: str, why: str, fix: str = "", in_env: Optional[bool] = None) -> Dict[str, Any]:
    return {"id": cid, "name": name, "seconds": None, "noise_s": None, "significant": False, "status": status,
            "why": why, "fix": fix, "in_env": in_env, "measured_as": "not measured"}


def remainder_sources(uses: Dict[str, Any], unwarmable: Sequence[Dict[str, str]]) -> List[Dict[str, str]]:
    """What the JIT left after the warmed modules can be, with the fix that removes each; the
    detected ones first."""
    out: List[Dict[str, str]] = []
    if uses.get("cudnn_benchmark"):
        out.append({"what": "cuDNN's tuning kernels (the program sets torch.backends.cudnn.benchmark = True: the "
                            "kernels cuDNN tries are PTX the driver compiles once per JIT cache)",
                    "fix": FIX_BENCHMARK_JIT, "detected": "yes"})
    for u in unwarmable:
        out.append({"what": "%s (PTX only for this GPU; cudafix warm cannot load it: %s)" % (u["label"], u["why"]),
                    "fix": FIX_REBUILD, "detected": "yes"})
    out.append({"what": "the program's own runtime compiles (NVRTC, CuPy, Numba: PTX loaded through the driver), or a "
                            "library's PTX that cudafix's scan of the env did not list",
                "fix": FIX_KEEP_JIT, "detected": "no"})
    return out


def jit_cause(walls: Dict[str, List[float]], growth: int, units: Sequence[str], uses: Dict[str, Any],
              unwarmable: Sequence[Dict[str, str]] = ()) -> Dict[str, Any]:
    """PTX JIT of the whole command (cold minus jit-warm), split by measurement: per unit that
    `cudafix warm` covers, cold minus a run whose JIT cache holds that unit alone; the remainder is
    the run with every unit warmed minus jit-warm, named by remainder_sources()."""
    if growth <= 0:
        return _unmeasured("ptx-jit", "PTX JIT", NOT_USED,
                           "the command wrote nothing into an empty JIT cache: no kernel of it was JIT-compiled",
                           attribution.FIX_WARM, in_env=False)
    c = _cause("ptx-jit", "PTX JIT (the JIT cache was empty)", attribution.FIX_WARM, True,
               "whole command, empty minus warm CUDA_CACHE_PATH", compare(walls, "cold", "jit-warm"),
               jit_cache_growth_bytes=growth)
    parts: List[Dict[str, Any]] = []
    for u in units:
        m = compare(walls, "cold", "warm:" + u)
        parts.append(dict(m, id="module", module=u, name="PTX JIT of %s" % u, fix=attribution.FIX_WARM,
                          measured_as="whole command, empty JIT cache minus one holding %s alone (cudafix warm's child)" % u))
    rest_case = ("warm-all" if len(units) > 1 else "warm:" + units[0]) if units else "cold"
    m = compare(walls, rest_case, "jit-warm")
    srcs = remainder_sources(uses, unwarmable)
    parts.append(dict(m, id="rest", name="JIT that cudafix warm does not cover", sources=srcs,
                      fix=srcs[0]["fix"], measured_as=(
                          "whole command, JIT cache holding %s minus fully warm" % (
                              "every module cudafix warm covers" if len(units) > 1 else units[0]) if units
                          else "whole command, empty minus warm CUDA_CACHE_PATH (no module cudafix warm covers)")))
    c["parts"] = parts
    return c


def inductor_cause(walls: Dict[str, List[float]], inductor_growth: int, uses: Dict[str, Any]) -> Dict[str, Any]:
    name = "torch.compile / Triton compiles (inductor cache empty)"
    if inductor_growth <= 0 and not uses.get("dynamo"):
        return _unmeasured("inductor-cache", name, NOT_USED, "the command wrote nothing into TORCHINDUCTOR_CACHE_DIR "
                           "or TRITON_CACHE_DIR%s" % (" and never imported torch._dynamo" if uses.get("python") else ""),
                           attribution.FIX_COMPILE)
    return _cause("inductor-cache", name, attribution.FIX_COMPILE, None,
                  "whole command, empty minus kept TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR",
                  compare(walls, "jit-warm", "inductor-kept"), inductor_cache_growth_bytes=inductor_growth)


def benchmark_cause(uses: Dict[str, Any]) -> Dict[str, Any]:
    name = "cuDNN autotuning (torch.backends.cudnn.benchmark = True)"
    if not uses.get("python"):
        return _unmeasured("cudnn-benchmark", name, UNKNOWN, "no Python process of the command reported (not Python, "
                           "or it ignores PYTHONPATH)", attribution.FIX_BENCHMARK)
    if not uses.get("cudnn_benchmark"):
        return _unmeasured("cudnn-benchmark", name, NOT_USED, "the program never sets torch.backends.cudnn.benchmark",
                           attribution.FIX_BENCHMARK)
    return _unmeasured("cudnn-benchmark", name, USED, "the program sets it: the tuning runs at every start and at every "
                       "new input shape, inside the command's own time (the built-in `verify --first-run` measures "
                       "it); the JIT of the kernels it tries is part of ptx-jit", attribution.FIX_BENCHMARK)


def loading_cause(walls: Dict[str, List[float]], env: Dict[str, str], uses: Dict[str, Any], name: str, fix: str) -> Dict[str, Any]:
    if env.get("CUDA_MODULE_LOADING", "").upper() == "EAGER":
        return _cause("cuda-module-loading", name, fix, True, "whole command, as set minus flipped",
                      compare(walls, "inductor-kept", "flip:CUDA_MODULE_LOADING"))
    if uses.get("module_loading_set_by_program"):
        return _unmeasured("cuda-module-loading", name, USED, "the program sets CUDA_MODULE_LOADING=EAGER itself "
                           "(cannot be flipped from outside)", "remove CUDA_MODULE_LOADING=EAGER from the program", True)
    if not uses.get("python"):
        return _unmeasured("cuda-module-loading", name, UNKNOWN, "not set in the env; no Python process of the command "
                           "reported what it set", fix)
    return _unmeasured("cuda-module-loading", name, NOT_USED, "lazy loading (%s)" % (
        "CUDA_MODULE_LOADING=%s" % uses["module_loading"] if uses.get("module_loading") else "the default"), fix)


def verdict(causes: List[Dict[str, Any]]) -> Dict[str, Any]:
    env_costs = [c["id"] for c in causes if c.get("significant") and c.get("in_env")]
    return {"verdict": attribution.DEGRADED if env_costs else attribution.HEALTHY, "env_causes": env_costs}


def _pm(c: Dict[str, Any]) -> str:
    if c.get("noise_s") is None:
        return "%+6.2f s (one run: noise unknown)" % c["seconds"]
    return "%+6.2f s (noise %.2f, spread %.2f)" % (c["seconds"], c["noise_s"], c.get("spread_s") or 0.0)


def render(rep: Dict[str, Any]) -> List[str]:
    st = rep.get("case_stats", {})
    cold, kept = st.get("cold") or {}, st.get("inductor-kept") or {}
    out = ["cudafix verify --first-run: first run %.2f s, %.2f s once every cache is warm (minimum of %d runs each; "
           "spreads %.2f s and %.2f s)" % (cold.get("min_s", 0), kept.get("min_s", 0), cold.get("n", 0),
                                           cold.get("spread_s", 0), kept.get("spread_s", 0))]
    for c in rep["causes"]:
        if c["seconds"] is None:
            out.append("  %-20s %s: %s" % (c["id"], c["status"], c.get("why", "")))
            continue
        if not c["significant"]:
            out.append("  %-20s %s  within noise (measured in this check)" % (c["id"], _pm(c)))
        else:
            out.append("  %-20s %s  %s" % (c["id"], _pm(c), c["name"]))
        for p in c.get("parts", []):
            label = p.get("module") or "the rest"
            if p["seconds"] is None:
                continue
            what = "within noise" if not p["significant"] else (
                p["name"] if p["id"] == "module" else "not a module cudafix warm covers: " + "; or ".join(
                    s["what"] for s in p["sources"]))
            out.append("    %-18s %s  %s" % (label[:18], _pm(p), what))
            if p["significant"]:
                out.append("    %-18s fix: %s" % ("", p["fix"]))
        if c["significant"] and not c.get("parts"):
            out.append("  %-20s fix: %s" % ("", c["fix"]))
    if rep["verdict"] == attribution.HEALTHY:
        out.append("no first-run cost of the env found above this check's noise")
    return out
