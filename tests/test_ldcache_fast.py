"""/etc/ld.so.cache's new-format table read in one pass (cudafix/probes/loader/ldcache.py ``_parse_new``,
issue 23: every `status` parses it): on this machine's real cache it gives what `ldconfig -p`
lists (tests/test_libraries.py) and, entry by entry, what the one-entry-at-a-time reading gives;
on damaged copies of the real cache (truncated, string offsets moved) both readings give the same
entries or the same error."""

from __future__ import annotations

import struct
from typing import List

from hypothesis import given, settings
from hypothesis import strategies as st

from cudafix.probes.loader import ldcache
from tests.conftest import require


def _reference(data: bytes, at: int) -> List[ldcache.CacheEntry]:
    """The reading before the change: unpack_from and _string per entry."""
    nlibs, _ = struct.unpack_from("<II", data, at + 20)
    if at + 48 + nlibs * 24 > len(data):
        raise ValueError("truncated entry table (%d entries)" % nlibs)
    out = []
    for i in range(nlibs):
        flags, key, value, _osv, hwcap = struct.unpack_from("<iIIIQ", data, at + 48 + i * 24)
        out.append(ldcache.CacheEntry(name=ldcache._string(data, at, key), path=ldcache._string(data, at, value),
                                      flags=flags, hwcap=hwcap))
    return out


def _real() -> bytes:
    try:
        with open(ldcache.LD_SO_CACHE, "rb") as fh:
            data = fh.read()
    except OSError:
        data = b""
    require(data.startswith(ldcache.NEW_MAGIC), "a new-format /etc/ld.so.cache (glibc >= 2.32)")
    return data


def _outcome(fn, data: bytes):
    try:
        return fn(data, 0)
    except (ValueError, struct.error, IndexError) as exc:
        return type(exc).__name__, str(exc)


def test_real_cache_entry_by_entry():
    data = _real()
    got = ldcache._parse_new(data, 0)
    assert got == _reference(data, 0) and len(got) > 10


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_damaged_copies_read_alike(draw):
    data = bytearray(_real())
    nlibs = struct.unpack_from("<I", data, 20)[0]
    kind = draw.draw(st.sampled_from(["truncate", "offset", "count"]))
    if kind == "truncate":
        data = data[:draw.draw(st.integers(0, len(data)))]
    elif kind == "offset":
        i = draw.draw(st.integers(0, max(0, nlibs - 1)))
        field = draw.draw(st.sampled_from([4, 8]))  # key or value
        struct.pack_into("<I", data, 48 + i * 24 + field, draw.draw(st.integers(0, 2 ** 32 - 1)))
    else:
        struct.pack_into("<I", data, 20, draw.draw(st.integers(0, nlibs + 3)))
    data = bytes(data)
    if len(data) < 28:
        return
    assert _outcome(ldcache._parse_new, data) == _outcome(_reference, data)
