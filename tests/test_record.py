"""cudafix.model.record against the truth, ``dataclasses.dataclass``: for every record class of
cudafix, a twin made by dataclasses from the same fields must construct, print, compare, hash,
refuse assignment and introspect the same (issue 23: record compiles the methods in one go)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import subprocess
import sys

import pytest

import cudafix
from cudafix.model import record as rec
from tests.conftest import REPO


def _record_classes():
    out = []
    for m in pkgutil.walk_packages(cudafix.__path__, "cudafix."):
        if m.name.startswith(("tools", "cudafix.plugins")) or m.name.endswith("__main__"):
            continue
        mod = importlib.import_module(m.name)
        for v in vars(mod).values():
            if isinstance(v, type) and v.__module__ == m.name and dataclasses.is_dataclass(v) \
                    and getattr(v.__init__, "__globals__", {}).get("__HAS_FACTORY") is rec._HAS_FACTORY:
                out.append(v)
    return out


CLASSES = _record_classes()


def _twin(cls):
    """The same class body through dataclasses.dataclass."""
    ns = {"__doc__": cls.__doc__, "__module__": cls.__module__, "__qualname__": cls.__qualname__,
          "__annotations__": dict(cls.__annotations__)}
    for k, v in cls.__dict__.items():
        if k not in ns and k not in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__",
                                     "__dict__", "__weakref__", "__dataclass_fields__", "__dataclass_params__",
                                     "__match_args__") and k not in cls.__dataclass_fields__:
            ns[k] = v
    for f in dataclasses.fields(cls):
        ns[f.name] = dataclasses.field(default=f.default, default_factory=f.default_factory, init=f.init, repr=f.repr,
                                       hash=f.hash, compare=f.compare, metadata=f.metadata)
    return dataclasses.dataclass(type(cls.__name__, cls.__bases__, ns), frozen=cls.__dataclass_params__.frozen)


def _args(cls):
    return {f.name: "v-%s" % f.name for f in dataclasses.fields(cls)
            if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}


def test_there_are_record_classes_to_check():
    assert len(CLASSES) >= 60, [c.__name__ for c in CLASSES]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: "%s.%s" % (c.__module__, c.__name__))
def test_record_behaves_as_dataclass(cls):
    twin = _twin(cls)
    assert str(inspect.signature(cls)) == str(inspect.signature(twin))
    assert [(f.name, f.type, f.init, f.repr, f.compare) for f in dataclasses.fields(cls)] == \
        [(f.name, f.type, f.init, f.repr, f.compare) for f in dataclasses.fields(twin)]
    assert getattr(cls, "__match_args__", None) == getattr(twin, "__match_args__", None)
    for p in ("init", "repr", "eq", "order", "unsafe_hash", "frozen"):
        assert getattr(cls.__dataclass_params__, p) == getattr(twin.__dataclass_params__, p), p
    a, b = cls(**_args(cls)), twin(**_args(cls))
    assert repr(a) == repr(b)
    assert dataclasses.asdict(a) == dataclasses.asdict(b)
    assert (a == cls(**_args(cls))) and (b == twin(**_args(cls))) and a != b  # other class: NotImplemented
    assert (cls.__hash__ is None) == (twin.__hash__ is None)
    if cls.__hash__ is not None and twin.__dataclass_params__.frozen:
        try:
            assert hash(a) == hash(b)
        except TypeError:  # a list-valued field: unhashable in both
            pytest.raises(TypeError, hash, b)
    if cls.__dataclass_params__.frozen:
        f = dataclasses.fields(cls)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError) as ea:
            setattr(a, f, 1)
        with pytest.raises(dataclasses.FrozenInstanceError) as eb:
            setattr(b, f, 1)
        assert str(ea.value) == str(eb.value)
        c = dataclasses.replace(a)
        assert c == a and c is not a


def test_edge_cases_against_dataclasses():
    import typing

    def body():
        return {"__doc__": "d", "__module__": __name__, "__annotations__": {"a": "int", "b": "typing.List[int]", "c": "str"},
                "b": dataclasses.field(default_factory=list), "c": dataclasses.field(default="x", repr=False, compare=False)}

    for frozen in (False, True):
        R = rec.record(type("R", (), body()), frozen=frozen)
        D = dataclasses.dataclass(type("R", (), body()), frozen=frozen)
        r, d = R(1), D(1)
        assert repr(r) == repr(d) == "R(a=1, b=[])" and R(1, [2]) == R(1, [2], "y") and R(1) != R(2)
        assert r.b is not R(1).b  # a fresh list per instance
        assert str(inspect.signature(R)) == str(inspect.signature(D))
    recursive = rec.record(type("N", (), {"__doc__": "d", "__module__": __name__, "__annotations__": {"x": "typing.Any"}}))
    n = recursive(None)
    n.x = n
    assert repr(n) == "N(x=...)"
    with pytest.raises(TypeError):
        rec.record(type("Bad", (), {"__doc__": "d", "__module__": __name__, "__annotations__": {"a": "int", "b": "int"},
                                    "a": 1}))
    def cv_body():
        return {"__doc__": "d", "__module__": __name__, "__annotations__": {"a": "int", "k": "ClassVar[int]"}, "k": 3}

    cv, dv = rec.record(type("C", (), cv_body())), dataclasses.dataclass(type("C", (), cv_body()))  # left to dataclasses
    assert [f.name for f in dataclasses.fields(cv)] == [f.name for f in dataclasses.fields(dv)]
    assert repr(cv(1)) == repr(dv(1))
    assert typing  # (the annotations above name it)


def test_record_on_python38():
    """record runs in user envs: the oldest Python cudafix supports builds the same classes."""
    import glob

    py = sorted(glob.glob("/root/.pyenv/versions/3.8.*/bin/python3.8"))
    from tests.conftest import require
    require(py, "a Python 3.8 (pyenv)")
    code = ("import dataclasses; from cudafix.model import snapshot, fixes, findings; "
            "s = snapshot.Snapshot(); f = fixes.EnvOp('set', 'A', 'b'); "
            "assert dataclasses.asdict(s) == dataclasses.asdict(snapshot.Snapshot()) and s == snapshot.Snapshot(); "
            "assert hash(f) == hash(fixes.EnvOp('set', 'A', 'b')); print(repr(f))")
    p = subprocess.run([py[-1], "-c", code], capture_output=True, text=True, cwd=str(REPO), timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "EnvOp(op='set', name='A', value='b')"
    assert sys.version_info >= (3, 8)
