"""Snapshot documents for `cudafix fleet`, however they were gathered.

A directory: every *.json file in it (not recursive).  A stream (stdin, a file): one or more JSON
documents one after the other, with or without separators — what `cat node*.json`, `srun ...
cudafix snapshot` with one output file per node, `pdsh`, or a Kubernetes Job's logs give.  pdsh's
"host: " line prefixes are stripped.  Each document is a `cudafix snapshot` (schema
cudafix.snapshot/1) or a `cudafix status --json` document (its "snapshot" member).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Iterator, List, Optional, Tuple

MAX_DOC_BYTES = 64 << 20  # one snapshot is ~30 KB; this bounds a corrupt or hostile input
_PDSH_PREFIX = re.compile(r"^[A-Za-z0-9_.-]+: ", re.M)


@dataclasses.dataclass
class Document:
    """One node's snapshot as parsed JSON, and where it came from."""

    source: str  # file path, or "<stdin>#3"
    data: dict


class EngineError(RuntimeError):
    """A cluster engine (Slurm, Ray) could not be used at all: one line for the user."""


@dataclasses.dataclass
class InputError:
    source: str
    message: str


def _snapshot_member(data: object) -> Optional[dict]:
    if not isinstance(data, dict):
        return None
    if data.get("schema") == "cudafix.status/1" and isinstance(data.get("snapshot"), dict):
        return data["snapshot"]
    if isinstance(data.get("schema"), str) and data["schema"].startswith("cudafix.snapshot/"):
        return data
    return None


def parse_stream(text: str, source: str) -> Tuple[List[Document], List[InputError]]:
    """Every JSON document in ``text`` (concatenated, whitespace between)."""
    if text.lstrip()[:1] not in ("{", "") and _PDSH_PREFIX.match(text.lstrip()):
        text = _PDSH_PREFIX.sub("", text)
    docs, errors = [], []
    dec = json.JSONDecoder()
    i, n, k = 0, len(text), 0
    while True:
        while i < n and text[i] in " \t\r\n,":
            i += 1
        if i >= n:
            break
        k += 1
        name = "%s#%d" % (source, k)
        try:
            data, i = dec.raw_decode(text, i)
        except ValueError as exc:
            errors.append(InputError(name, "not JSON: %s" % exc))
            break  # the rest of the stream cannot be re-synchronised reliably
        snap = _snapshot_member(data)
        if snap is None:
            errors.append(InputError(name, "not a cudafix snapshot (schema %r)" % (data.get("schema") if isinstance(data, dict) else type(data).__name__)))
        else:
            docs.append(Document(name, snap))
    return docs, errors


def read_path(path: str) -> Tuple[List[Document], List[InputError]]:
    """A file (one or more documents) or a directory of *.json files."""
    if os.path.isdir(path):
        docs: List[Document] = []
        errors: List[InputError] = []
        for name in sorted(os.listdir(path)):
            if name.endswith(".json"):
                d, e = read_path(os.path.join(path, name))
                docs += d
                errors += e
        return docs, errors
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_DOC_BYTES + 1)
    except OSError as exc:
        return [], [InputError(path, "cannot read: %s" % (exc.strerror or exc))]
    if len(raw) > MAX_DOC_BYTES:
        return [], [InputError(path, "larger than %d MiB: not a snapshot" % (MAX_DOC_BYTES >> 20))]
    docs, errors = parse_stream(raw.decode("utf-8", "replace"), path)
    if len(docs) == 1 and not errors:
        docs[0].source = path  # one document per file: the file names it
    return docs, errors


def iter_sources(paths: List[str]) -> Iterator[Tuple[List[Document], List[InputError]]]:
    for p in paths:
        yield read_path(p)
