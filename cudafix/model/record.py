"""``record``: ``dataclasses.dataclass`` with less to compile per class.

On Python 3.8-3.12 ``dataclasses.dataclass`` compiles each method it writes (``__init__``,
``__repr__``, ``__eq__``; for a frozen class also ``__hash__``, ``__setattr__``,
``__delattr__``) from source text, and compiling is most of its cost (docs/benchmarks.md, "Figures behind the code"), and
cudafix defines ~60 on the path of ``cudafix status`` (issue 23).  ``record`` lets
dataclasses do everything except the methods (fields, defaults, ``__dataclass_fields__``,
``__match_args__``), compiles ``__init__`` alone (its signature is the fields'), and gives the
other methods as closures over the field names that return what dataclasses' would.  The class
is a dataclass (``fields``, ``asdict``, ``replace``, ``is_dataclass``; ``__dataclass_params__``
says init, repr, eq and frozen as they are).  A class this does not cover exactly (no
docstring, a dataclass base, its own dunder methods, ``__post_init__``, keyword-only or
init-only fields) goes to ``dataclasses.dataclass``.  tests/test_record.py compares every record
class of cudafix with ``dataclasses.dataclass`` of the same fields.
"""

from __future__ import annotations

import builtins
import dataclasses
import reprlib

_OWN = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__", "__post_init__")


class _HasFactory:
    def __repr__(self) -> str:
        return "<factory>"  # what inspect.signature shows, as for dataclasses' own sentinel


_HAS_FACTORY = _HasFactory()


def record(cls=None, *, frozen: bool = False):  # type: ignore[no-untyped-def]
    """``@record`` / ``@record(frozen=True)``: ``@dataclasses.dataclass`` (same arguments), faster."""
    if cls is None:
        return lambda c: record(c, frozen=frozen)
    if not _covered(cls):
        return dataclasses.dataclass(cls, frozen=frozen)
    if not _fields_fast(cls):
        cls = dataclasses.dataclass(cls, init=False, repr=False, eq=False)
    fields = [f for f in cls.__dataclass_fields__.values() if f._field_type is dataclasses._FIELD]  # type: ignore[attr-defined]
    if len(fields) != len(cls.__dataclass_fields__) or any(getattr(f, "kw_only", False) for f in fields):
        raise TypeError("record %s: ClassVar, InitVar or keyword-only fields: use dataclasses.dataclass" % cls.__name__)
    _build(cls, fields, frozen)
    p = cls.__dataclass_params__
    p.init = p.repr = p.eq = True
    p.frozen = frozen
    return cls


class _Template:
    """What ``dataclasses.dataclass(init=False, repr=False, eq=False)`` gives a plain class on this
    Python: its parameters and the attributes it adds (``__match_args__`` 3.10+, ``__replace__``
    3.13+), copied by :func:`_fields_fast`."""


_TEMPLATE = dataclasses.dataclass(_Template, init=False, repr=False, eq=False)
_ADDED = tuple(n for n in ("__replace__",) if n in _TEMPLATE.__dict__)
_MATCH_ARGS = "__match_args__" in _TEMPLATE.__dict__
_PARAMS = type(_TEMPLATE.__dataclass_params__)
_PARAM_SLOTS = tuple(getattr(_PARAMS, "__slots__", ()))


def _fields_fast(cls: type) -> bool:
    """Give ``cls`` the fields ``dataclasses.dataclass(cls, init=False, repr=False, eq=False)``
    would (``__dataclass_fields__``, ``__dataclass_params__``, class attributes, ``__match_args__``),
    without its per-field type checks (ClassVar / InitVar: :func:`_covered` ruled them out): less
    per class (docs/benchmarks.md, "Figures behind the code").  False, nothing changed, where a class needs dataclasses' own checks and errors
    (a mutable default, a field without annotation, parameters of an unknown shape)."""
    own = cls.__dict__
    ann = own.get("__annotations__", {})
    # no annotations in the class dict (none at all, or an interpreter that computes them lazily,
    # PEP 649/749 without `from __future__ import annotations`): dataclasses' own reading
    if not ann or not _PARAM_SLOTS or any(isinstance(v, dataclasses.Field) and k not in ann for k, v in own.items()):
        return False
    fields = {}
    for name, tp in ann.items():
        default = own.get(name, dataclasses.MISSING)
        if isinstance(default, dataclasses.Field):
            f = default
        else:
            f = dataclasses.field(default=default)
        d = f.default
        if d is not dataclasses.MISSING and (isinstance(d, (list, dict, set)) or type(d).__hash__ is None):
            return False  # dataclasses refuses a mutable default: its message
        if getattr(f, "kw_only", None) is dataclasses.MISSING:
            f.kw_only = False  # type: ignore[attr-defined]
        f.name, f.type, f._field_type = name, tp, dataclasses._FIELD  # type: ignore[attr-defined]
        fields[name] = f
    for name, f in fields.items():
        if isinstance(own.get(name), dataclasses.Field):
            if f.default is dataclasses.MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
    params = _PARAMS.__new__(_PARAMS)
    for slot in _PARAM_SLOTS:
        setattr(params, slot, getattr(_TEMPLATE.__dataclass_params__, slot))
    cls.__dataclass_params__ = params  # type: ignore[attr-defined]
    cls.__dataclass_fields__ = fields  # type: ignore[attr-defined]
    if _MATCH_ARGS and "__match_args__" not in own:
        cls.__match_args__ = tuple(n for n, f in fields.items() if f.init)  # type: ignore[attr-defined]
    for name in _ADDED:
        if name not in own:
            setattr(cls, name, _TEMPLATE.__dict__[name])
    return True


def _covered(cls: type) -> bool:
    own = cls.__dict__
    special = any(w in str(t) for t in own.get("__annotations__", {}).values() for w in ("ClassVar", "InitVar", "KW_ONLY"))
    return bool(own.get("__doc__")) and not special and not any(n in own for n in _OWN) \
        and not any(hasattr(b, "__dataclass_fields__") for b in cls.__mro__[1:])


# Every __init__ source built in this process (tools/record_inits.py collects them), and those
# record_inits.py did not hold (compiled here; tests/test_record_inits.py wants none).
SOURCES: list = []
MISSED: list = []
_COMPILED: list = []


def _compiled() -> dict:
    """record_inits.INITS (source -> function), imported once; {} where it is missing."""
    if not _COMPILED:
        try:
            from cudafix.model.record_inits import INITS
        except Exception:  # noqa: BLE001 - missing or broken: compile every class here, as before
            INITS = {}
        _COMPILED.append(INITS)
    return _COMPILED[0]


def _build(cls: type, fields: list, frozen: bool) -> None:
    g = {"__HAS_FACTORY": _HAS_FACTORY, "__setobj": object.__setattr__}
    params, body, seen_default = ["self"], [], False
    defaults: list = []  # the values of the parameters with a default, in order
    for f in fields:
        n = f.name
        has_factory = f.default_factory is not dataclasses.MISSING
        if f.init:
            if has_factory:
                g["__f_" + n] = f.default_factory
                params.append("%s=__HAS_FACTORY" % n)
                defaults.append(_HAS_FACTORY)
                value = "__f_%s() if %s is __HAS_FACTORY else %s" % (n, n, n)
                seen_default = True
            elif f.default is not dataclasses.MISSING:
                g["__d_" + n] = f.default
                params.append("%s=__d_%s" % (n, n))
                defaults.append(f.default)
                value = n
                seen_default = True
            else:
                if seen_default:
                    raise TypeError("non-default argument %r follows default argument" % n)
                params.append(n)
                value = n
        elif has_factory:
            g["__f_" + n] = f.default_factory
            value = "__f_%s()" % n
        else:
            continue  # init=False with a plain default: the class attribute serves
        body.append("  __setobj(self, %r, %s)" % (n, value) if frozen else "  self.%s = %s" % (n, value))
    src = "\n".join(["def __init__(%s):" % ", ".join(params)] + (body or ["  pass"]))
    compiled = _compiled().get(src)
    if compiled is not None:
        # the same function, compiled ahead in cudafix/model/record_inits.py: making it from its
        # code is far cheaper than compiling it (docs/benchmarks.md, "Figures behind the code")
        g["__builtins__"] = builtins.__dict__  # what exec() puts in the globals it is given
        init = type(_build)(compiled.__code__, g, "__init__", tuple(defaults) or None)
    else:
        MISSED.append(src)
        exec(src, g)  # noqa: S102 (field names only)
        init = g["__init__"]
    SOURCES.append(src)
    init.__annotations__ = dict({f.name: f.type for f in fields if f.init}, **{"return": None})
    methods = {"__init__": init,
               "__repr__": reprlib.recursive_repr()(_repr_fn(tuple(f.name for f in fields if f.repr))),
               "__eq__": _eq_fn(tuple(f.name for f in fields if f.compare))}
    if frozen:
        names = tuple(f.name for f in fields)
        methods["__hash__"] = _hash_fn(tuple(f.name for f in fields if (f.hash is None and f.compare) or f.hash))
        methods["__setattr__"], methods["__delattr__"] = _frozen_fns(cls, names)
    for name, fn in methods.items():
        fn.__qualname__ = "%s.%s" % (cls.__qualname__, name)
        setattr(cls, name, fn)
    if not frozen:
        cls.__hash__ = None  # type: ignore[assignment]  (eq without frozen: unhashable, as dataclasses makes it)


# The other methods are closures over the field names: nothing to compile per class.  Each gives
# what dataclasses' generated method gives: "Cls(a=1, b='x')" (repr() of each value), equality of
# the field tuples between instances of the same class, hash of that tuple, FrozenInstanceError.

def _repr_fn(names):  # type: ignore[no-untyped-def]
    def __repr__(self):  # type: ignore[no-untyped-def]
        return self.__class__.__qualname__ + "(" + ", ".join("%s=%r" % (n, getattr(self, n)) for n in names) + ")"
    return __repr__


def _eq_fn(names):  # type: ignore[no-untyped-def]
    def __eq__(self, other):  # type: ignore[no-untyped-def]
        if other.__class__ is self.__class__:
            return tuple([getattr(self, n) for n in names]) == tuple([getattr(other, n) for n in names])
        return NotImplemented
    return __eq__


def _hash_fn(names):  # type: ignore[no-untyped-def]
    def __hash__(self):  # type: ignore[no-untyped-def]
        return hash(tuple([getattr(self, n) for n in names]))
    return __hash__


def _frozen_fns(cls, names):  # type: ignore[no-untyped-def]
    def __setattr__(self, name, value):  # type: ignore[no-untyped-def]
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError("cannot assign to field %r" % (name,))
        super(cls, self).__setattr__(name, value)

    def __delattr__(self, name):  # type: ignore[no-untyped-def]
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError("cannot delete field %r" % (name,))
        super(cls, self).__delattr__(name)
    return __setattr__, __delattr__


# -- asdict ------------------------------------------------------------------------------------

_ATOMIC = (str, int, float, bool, type(None), bytes)
_NAMES: dict = {}  # class -> its field names (dataclasses.fields' order)


def asdict(obj):  # type: ignore[no-untyped-def]
    """``dataclasses.asdict(obj)``, the same dict: atomic values as they are (deepcopy returns
    them unchanged), dataclass instances, lists, tuples, named tuples and dicts rebuilt, anything
    else deep-copied, as dataclasses does.  A snapshot's JSON document walks ~800 values; this
    spares dataclasses' per-value fields() call and type checks."""
    cls = type(obj)
    if cls in _ATOMIC:
        return obj
    names = _NAMES.get(cls)
    if names is None and hasattr(cls, "__dataclass_fields__") and not isinstance(obj, type):
        names = _NAMES[cls] = tuple(f.name for f in dataclasses.fields(obj))
    if names is not None:
        return {n: asdict(getattr(obj, n)) for n in names}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return cls(*[asdict(v) for v in obj])
    if isinstance(obj, (list, tuple)):
        return cls(asdict(v) for v in obj)
    if isinstance(obj, dict):
        return cls((asdict(k), asdict(v)) for k, v in obj.items())
    import copy

    return copy.deepcopy(obj)
