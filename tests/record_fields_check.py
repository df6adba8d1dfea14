"""Run by tests/test_record_fields.py under each real interpreter: every record class of cudafix
against a twin made by dataclasses.dataclass from the same body (the truth): its Field objects
(every attribute), __dataclass_params__, __match_args__, __replace__, class attributes and
signature.  Prints one summary line; "DIFF" lines name a class that differs.

    python tests/record_fields_check.py REPO
"""
import sys, importlib, pkgutil, dataclasses, inspect
sys.path.insert(0, sys.argv[1])
import cudafix
from cudafix.model import record as rec
mods = []
for m in pkgutil.walk_packages(cudafix.__path__, "cudafix."):
    if m.name.startswith("cudafix.plugins") or m.name.endswith("__main__"): continue
    try: mods.append(importlib.import_module(m.name))
    except ImportError: pass  # a module needing what this interpreter lacks
n = bad = 0
FA = ["name", "type", "default", "default_factory", "init", "repr", "hash", "compare", "metadata", "kw_only", "_field_type"]
for mod in mods:
    for v in list(vars(mod).values()):
        if not (isinstance(v, type) and v.__module__ == mod.__name__ and dataclasses.is_dataclass(v)
                and getattr(v.__init__, "__globals__", {}).get("__HAS_FACTORY") is rec._HAS_FACTORY): continue
        n += 1
        # twin via the original body
        ns = {"__doc__": v.__doc__, "__module__": v.__module__, "__qualname__": v.__qualname__, "__annotations__": dict(v.__annotations__)}
        for f in dataclasses.fields(v):
            if f.default_factory is not dataclasses.MISSING: ns[f.name] = dataclasses.field(default_factory=f.default_factory, repr=f.repr, compare=f.compare, hash=f.hash, init=f.init, metadata=f.metadata)
            elif not (f.init and f.repr and f.compare and f.hash is None and not f.metadata): ns[f.name] = dataclasses.field(default=f.default, repr=f.repr, compare=f.compare, hash=f.hash, init=f.init, metadata=f.metadata)
            elif f.default is not dataclasses.MISSING: ns[f.name] = f.default
        frozen = v.__dataclass_params__.frozen
        twin = dataclasses.dataclass(type(v.__name__, (), dict(ns)), frozen=frozen)
        a = [tuple(getattr(f, k, None) for k in FA) for f in v.__dataclass_fields__.values()]
        b = [tuple(getattr(f, k, None) for k in FA) for f in twin.__dataclass_fields__.values()]
        pa = [getattr(v.__dataclass_params__, s) for s in rec._PARAM_SLOTS]; pb = [getattr(twin.__dataclass_params__, s) for s in rec._PARAM_SLOTS]
        extra = [(k, v.__dict__.get(k, "-") == twin.__dict__.get(k, "-")) for k in ("__match_args__", "__replace__")]
        cattr = [(f.name, v.__dict__.get(f.name, "MISSING") == twin.__dict__.get(f.name, "MISSING")) for f in dataclasses.fields(v)]
        sig = str(inspect.signature(v)) == str(inspect.signature(twin))
        if a != b or pa != pb or not all(x for _, x in extra) or not all(x for _, x in cattr) or not sig:
            bad += 1; print("DIFF", v.__qualname__, a != b, pa, pb, extra, [c for c in cattr if not c[1]], sig)
print("SUMMARY classes %d differing %d missed %d" % (n, bad, len(rec.MISSED)))
