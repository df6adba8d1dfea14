"""Issue 38's "done when", computed from the raw outputs of bench/issue38_h200.sh (no GPU needed):

    python3 bench/issue38/compare.py OUTDIR       # reads own.json cmd1.json cmd2.json fr320ext.json

Checks (each printed with its numbers, written to OUTDIR/summary.json):
- every cost `verify --first-run -- python prog.py` attributes within 25% of the program's own timers
  (own.json, fresh processes, min of empty minus min of warm): the PTX JIT of the whole command against
  the process walls, the module's share against the module's first call, the rest against the first
  forward (cuDNN's tuning kernels);
- the per-module split names the right module (libcfx_ptx75.so) and the rest's first source is cuDNN's;
- the two consecutive verify runs agree within 25% on every significant cause (|a-b| <= 0.25 max(a,b));
- inductor-cache and cuda-module-loading "not used", cudnn-benchmark "used" (the program sets it);
- the built-in detector's ext-jit (fr320ext.json) against the program's own module first call.
Stdlib only; Python 3.8 compatible.
"""

import json
import os
import sys


def load(d, name):
    p = os.path.join(d, name)
    if not os.path.exists(p):
        return None
    try:
        with open(p) as fh:
            return json.load(fh)
    except ValueError:
        return None


def within(a, b, tol=0.25):
    return a is not None and b is not None and b > 0 and abs(a - b) <= tol * b


def agree(a, b, tol=0.25):
    return a is not None and b is not None and abs(a - b) <= tol * max(abs(a), abs(b))


def cmd_figures(rep):
    if not rep or "causes" not in rep:
        return None
    c = {x["id"]: x for x in rep["causes"]}
    jit = c.get("ptx-jit", {})
    parts = {(p.get("module") or p["id"]): p for p in jit.get("parts", [])}
    mod = [p for p in jit.get("parts", []) if p["id"] == "module"]
    rest = parts.get("rest", {})
    return {"ptx-jit": jit.get("seconds"), "ptx-jit_noise": jit.get("noise_s"), "ptx-jit_sig": jit.get("significant"),
            "modules": [p.get("module") for p in mod],
            "module": mod[0]["seconds"] if mod else None, "module_sig": bool(mod and mod[0]["significant"]),
            "module_noise": mod[0].get("noise_s") if mod else None,
            "rest": rest.get("seconds"), "rest_sig": rest.get("significant"), "rest_noise": rest.get("noise_s"),
            "rest_first_source": (rest.get("sources") or [{}])[0].get("what", ""),
            "status": {k: v.get("status") for k, v in c.items()}, "verdict": rep.get("verdict"),
            "total_s": rep.get("total_s"), "planned_runs": rep.get("planned_runs"), "runs": len(rep.get("runs", []))}


def main():
    d = sys.argv[1]
    own, fr = load(d, "own.json"), load(d, "fr320ext.json")
    cmds = [cmd_figures(load(d, n)) for n in ("cmd1.json", "cmd2.json")]
    checks = []

    def check(name, ok, detail):
        checks.append({"check": name, "ok": bool(ok), "detail": detail})
        print("%-4s %s: %s" % ("ok" if ok else "FAIL", name, detail))

    direct = (own or {}).get("direct_s", {})
    print("own timers (min empty - min warm):", json.dumps(direct), "spreads", json.dumps((own or {}).get("spread_s")))
    for i, f in enumerate(cmds, 1):
        if f is None:
            check("verify run %d present" % i, False, "no report")
            continue
        print("verify run %d: %s" % (i, json.dumps(f)))
        check("run %d: runs made as announced" % i, f["runs"] == f["planned_runs"], "%s of %s" % (f["runs"], f["planned_runs"]))
        check("run %d: ptx-jit vs the process walls" % i, within(f["ptx-jit"], direct.get("whole")),
              "%s vs %s" % (f["ptx-jit"], direct.get("whole")))
        check("run %d: the split names libcfx_ptx75.so" % i, f["modules"] == ["libcfx_ptx75.so"], f["modules"])
        check("run %d: module share vs the module's own first call" % i, within(f["module"], direct.get("ext-jit")),
              "%s vs %s" % (f["module"], direct.get("ext-jit")))
        check("run %d: rest vs the first forward (cuDNN's kernels)" % i, within(f["rest"], direct.get("cudnn-jit")),
              "%s vs %s" % (f["rest"], direct.get("cudnn-jit")))
        check("run %d: the rest is named cuDNN's first" % i, f["rest_first_source"].startswith("cuDNN"),
              f["rest_first_source"][:60])
        st = f["status"]
        check("run %d: not used / used" % i, st.get("inductor-cache") == "not used" and st.get("cuda-module-loading") ==
              "not used" and st.get("cudnn-benchmark") == "used, not measured", st)
    if all(cmds):
        a, b = cmds
        for key, sig in (("ptx-jit", "ptx-jit_sig"), ("module", "module_sig"), ("rest", "rest_sig")):
            if a[sig] or b[sig]:
                check("runs 1 and 2 agree on %s" % key, agree(a[key], b[key]), "%s vs %s" % (a[key], b[key]))
    if fr and "causes" in fr:
        c = {x["id"]: x for x in fr["causes"]}
        print("built-in 320 + PTX-only module:", json.dumps({k: (v.get("seconds"), v.get("significant")) for k, v in c.items()}),
              "verdict", fr.get("verdict"))
        ext = c.get("ext-jit", {}).get("seconds")
        check("built-in ext-jit vs the module's own first call", within(ext, direct.get("ext-jit")),
              "%s vs %s" % (ext, direct.get("ext-jit")))
    else:
        check("built-in 320 run measured", False, "fr320ext.json: %s" % ((fr or {}).get("verdict") or "missing"))
    with open(os.path.join(d, "summary.json"), "w") as fh:
        json.dump({"own_direct_s": direct, "own_spread_s": (own or {}).get("spread_s"), "verify": cmds,
                   "builtin": {k: v.get("seconds") for k, v in ({x["id"]: x for x in fr["causes"]} if fr and "causes" in fr
                                                              else {}).items()},
                   "checks": checks}, fh, indent=1)
    return 0 if checks and all(c["ok"] for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
