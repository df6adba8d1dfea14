"""A rule's test input in a few lines: a real recorded snapshot plus stated overrides.

    from tests.snapbuild import snap, H200, DELETE

    snap(H200, env__CUDA_LAUNCH_BLOCKING="1")                       # "__" stands for "."
    snap(H200, {"env.CUDA_MODULE_LOADING": "EAGER"})                # dotted paths
    snap(H200, env={"CUDA_MODULE_LOADING": "EAGER"})                # nested dicts merge
    snap(H200, {"gpus.gpus.0.name": "NVIDIA GeForce RTX 4090"})     # list items by index
    snap(H200, {"libraries.resolutions[soname=libcuda.so.1].resolved": "/x/libcuda.so.1"})  # by a field
    snap(H200, {"env.TORCH_CUDA_ARCH_LIST": DELETE})                # drop a key

The base is a real recording (``H200`` = tests/fixtures/h200/snapshot.json, `cudafix snapshot` on
the project's H200 device machine, see tests/fixtures/h200/SOURCES.md), or any other labelled
fixture.  Everything not overridden is what that machine reported.  The result's ``source`` names
the base's kind, the base and every override, so a failing test shows exactly what was changed.
"""

from __future__ import annotations

import copy
import json
import pathlib
import re
from typing import Any, Dict, List, Mapping, Optional, Union

from cudafix.model.snapshot import Snapshot

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
H200 = "h200/snapshot.json"

DELETE = object()  # an override value that removes the key

_SELECT = re.compile(r"^(?P<key>[^\[\]]+)\[(?P<field>[^=\]]+)=(?P<value>[^\]]*)\]$")


def load_base(base: Union[str, Mapping[str, Any]]) -> Dict[str, Any]:
    """A recorded snapshot as a dict: a path under tests/fixtures, an absolute path, or a dict (copied)."""
    if isinstance(base, Mapping):
        return copy.deepcopy(dict(base))
    path = pathlib.Path(base)
    if not path.is_absolute():
        path = FIXTURES / path
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def _split(path: str) -> List[str]:
    """'a.b[k=v].c' -> ['a', 'b[k=v]', 'c'] (dots inside [...] do not split: sonames have dots)."""
    parts, cur, depth = [], "", 0
    for ch in path:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "." and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    if any(not p for p in parts):
        raise KeyError("bad override path %r" % path)
    return parts


def _step(node: Any, part: str, path: str, create: bool) -> Any:
    m = _SELECT.match(part)
    if m:
        items = node.get(m.group("key")) if isinstance(node, dict) else None
        if not isinstance(items, list):
            raise KeyError("%s: %r is not a list" % (path, m.group("key")))
        found = [it for it in items if isinstance(it, dict) and str(it.get(m.group("field"))) == m.group("value")]
        if len(found) != 1:
            raise KeyError("%s: %d items match %s" % (path, len(found), part))
        return found[0]
    if isinstance(node, list):
        return node[int(part)]
    if not isinstance(node, dict):
        raise KeyError("%s: cannot descend into %r at %r" % (path, type(node).__name__, part))
    if part not in node:
        if not create:
            raise KeyError("%s: no key %r in the base" % (path, part))
        node[part] = {}
    return node[part]


# Map fields of the snapshot schema added after some fixtures were recorded: an override may fill
# one in (the recording's reader did not know the fact; the override says what the new reader reads).
NEWER_MAPS = ("ptx_isa",)


def set_path(doc: Dict[str, Any], path: str, value: Any) -> None:
    """Set (or with DELETE remove) one dotted path.  Intermediate keys must exist in the base,
    except under ``env`` / ``assumed`` / ``probe_errors`` (free-form maps), so a typo fails loudly."""
    parts = _split(path)
    free = parts[0] in ("env", "assumed", "probe_errors") or any(p in NEWER_MAPS for p in parts[:-1])
    node: Any = doc
    for part in parts[:-1]:
        # A map field newer than the recording (NEWER_MAPS) may be created under it.
        node = _step(node, part, path, create=free)
    last = parts[-1]
    if isinstance(node, list):
        if value is DELETE:
            del node[int(last)]
        else:
            node[int(last)] = value
        return
    if not isinstance(node, dict):
        raise KeyError("%s: cannot set %r on a %s" % (path, last, type(node).__name__))
    if value is DELETE:
        if last not in node:
            raise KeyError("%s: nothing to delete" % path)
        del node[last]
    elif not free and last not in node and not isinstance(value, dict):
        raise KeyError("%s: no key %r in the base (typo?)" % (path, last))
    else:
        node[last] = value


def _flatten(prefix: str, value: Any, out: Dict[str, Any]) -> None:
    """Nested dict overrides merge into the base: {'env': {'A': '1'}} -> {'env.A': '1'}."""
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _flatten(prefix + "." + k if prefix else k, v, out)
    else:
        out[prefix] = value


def build(base: Union[str, Mapping[str, Any]] = H200, overrides: Optional[Mapping[str, Any]] = None,
          **kw: Any) -> Dict[str, Any]:
    """The base snapshot dict with the overrides applied, ``source`` naming both."""
    doc = load_base(base)
    flat: Dict[str, Any] = {}
    for k, v in list((overrides or {}).items()) + [(k.replace("__", "."), v) for k, v in kw.items()]:
        _flatten(k, v, flat)
    for path, value in flat.items():
        set_path(doc, path, value)
    if flat:
        said = ", ".join("%s=%s" % (p, "<deleted>" if v is DELETE else json.dumps(v)) for p, v in flat.items())
        base_name = "tests/fixtures/" + base if isinstance(base, str) else "a snapshot dict"
        kind = (doc.get("_fixture") or {}).get("kind", "unlabelled")  # say what the base is
        doc["source"] = "%s base %s + overrides: %s" % (kind, base_name, said)
    return doc


def snap(base: Union[str, Mapping[str, Any]] = H200, overrides: Optional[Mapping[str, Any]] = None,
         **kw: Any) -> Snapshot:
    """A Snapshot: the recorded ``base`` with ``overrides`` (dotted paths) and ``kw`` (``__`` = ``.``)."""
    return Snapshot.from_dict(build(base, overrides, **kw))
