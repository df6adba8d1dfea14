"""The socket interfaces NCCL can bootstrap on, found the way NCCL finds them, and the active
RDMA ports NCCL's IB transport can use.

NCCL (NVIDIA/nccl src/os/linux.cc, ncclOsFindInterfaces) walks getifaddrs() and keeps an entry
only when it has an IPv4 or IPv6 address, the interface is IFF_RUNNING, and the address is not
the IPv6 loopback; the name filter (NCCL_SOCKET_IFNAME) is applied after that.  An interface that
exists in /sys/class/net without an address is therefore never used.  This module calls the same
libc getifaddrs() through ctypes (no subprocess) and applies the same three conditions.

The IB transport (src/transport/net_ib/init.cc) uses a device's port only when its state is
ACTIVE and its link layer is InfiniBand or Ethernet: read here from
/sys/class/infiniband/<dev>/ports/<n>/{state,link_layer}, as "<dev>:<port>".
"""

from __future__ import annotations

import ctypes
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional, Tuple

from cudafix.probes.machine.host import describe_oserror, join_root

IFF_RUNNING = 0x40
MAX_ENTRIES = 4096


class _Sockaddr(ctypes.Structure):
    _fields_ = [("sa_family", ctypes.c_ushort), ("sa_data", ctypes.c_ubyte * 14)]


class _Ifaddrs(ctypes.Structure):
    pass


_Ifaddrs._fields_ = [
    ("ifa_next", ctypes.POINTER(_Ifaddrs)),
    ("ifa_name", ctypes.c_char_p),
    ("ifa_flags", ctypes.c_uint),
    ("ifa_addr", ctypes.POINTER(_Sockaddr)),
    ("ifa_netmask", ctypes.POINTER(_Sockaddr)),
    ("ifa_ifu", ctypes.POINTER(_Sockaddr)),
    ("ifa_data", ctypes.c_void_p),
]


def _libc() -> ctypes.CDLL:
    """The C library with getifaddrs.  The interpreter's own namespace first: dlopen(NULL) sees the libc
    Python is linked to (nothing read from a file); else glibc's soname through the trusted loader
    (store/trustload.py) -- never ctypes.util.find_library, which runs ldconfig and gcc."""
    from cudafix.store import trustload

    try:
        libc = trustload.load_process()
        if libc.getifaddrs and libc.freeifaddrs:  # AttributeError where the symbols are missing
            return libc
        raise AttributeError("getifaddrs")
    except (OSError, AttributeError):
        lib, why = trustload.load_soname("libc.so.6", os.environ.get("LD_LIBRARY_PATH"), use_errno=True)
        if lib is None:
            raise OSError(why)
        return lib


def socket_interfaces() -> Tuple[Optional[List[str]], str]:
    """(names NCCL's interface search can return, how) or (None, why not)."""
    # _socket, not socket: the same constants without socket.py's enum conversions
    from _socket import AF_INET, AF_INET6

    try:
        libc = _libc()
        getifaddrs, freeifaddrs = libc.getifaddrs, libc.freeifaddrs
    except (OSError, AttributeError) as exc:
        return None, "getifaddrs unavailable: %s" % exc
    head = ctypes.POINTER(_Ifaddrs)()
    if getifaddrs(ctypes.byref(head)) != 0:
        return None, "getifaddrs: %s" % os.strerror(ctypes.get_errno())
    names: List[str] = []
    try:
        p, n = head, 0
        while p and n < MAX_ENTRIES:
            e = p.contents
            n += 1
            p = e.ifa_next
            if not e.ifa_addr or not e.ifa_name:
                continue
            fam = e.ifa_addr.contents.sa_family
            if fam not in (AF_INET, AF_INET6) or not e.ifa_flags & IFF_RUNNING:
                continue
            if fam == AF_INET6:
                # sockaddr_in6: family(2) port(2) flowinfo(4) addr(16): sa_data[6:22] spills past
                # the 14-byte sockaddr, so read the address from the pointer itself
                raw = ctypes.string_at(ctypes.addressof(e.ifa_addr.contents) + 8, 16)
                if raw == b"\0" * 15 + b"\x01":
                    continue
            name = e.ifa_name.decode("utf-8", "surrogateescape")
            if name not in names:
                names.append(name)
    finally:
        freeifaddrs(head)
    return sorted(names), "getifaddrs(): interfaces with an IPv4/IPv6 address that are running (as NCCL's ncclOsFindInterfaces)"


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read(256).strip()


def active_ib_ports(root: str, devices: List[str]) -> Tuple[Optional[List[str]], str]:
    """["mlx5_0:1", ...]: ports NCCL's IB transport can use, or (None, why not)."""
    out: List[str] = []
    for dev in devices:
        pdir = join_root(root, "/sys/class/infiniband/%s/ports" % dev)
        try:
            ports = sorted(os.listdir(pdir), key=lambda s: (len(s), s))
        except OSError as exc:
            return None, "%s: %s" % (pdir, describe_oserror(exc))
        for port in ports[:64]:
            try:
                state = _read(os.path.join(pdir, port, "state"))
                layer = _read(os.path.join(pdir, port, "link_layer"))
            except OSError as exc:
                return None, "%s/%s: %s" % (pdir, port, describe_oserror(exc))
            if state.endswith("ACTIVE") and layer in ("InfiniBand", "Ethernet"):
                out.append("%s:%s" % (dev, port))
    return out, "/sys/class/infiniband/*/ports/*/state and link_layer (ACTIVE, InfiniBand or Ethernet)"
