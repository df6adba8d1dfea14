"""The one trusted loader: the only way cudafix loads a shared object it did not ship (issue 36, H1/H2).

A shared object's constructors run as whoever loads it -- root, when root runs cudafix -- so a
library another user owns or can replace must never be loaded.  The check and the load are one
resolution, never two (a second ``realpath`` is what let a flipped symbolic link through):

- :func:`open_checked` walks the path from ``/`` one component at a time, each directory opened
  relative to the one before (``O_DIRECTORY | O_NOFOLLOW``) and ``fstat``-ed once open: every
  directory on the way -- the link's own directory as well as every one on its real path -- must
  be owned by root, us or one of ``owners`` (the env's owner: whoever can already change torch)
  and writable by nobody else (a sticky ancestor such as ``/tmp`` only with ``sticky_ok``, never
  the file's own directory); a symbolic link is followed only if one of those owns it;
- the file itself is opened relative to its checked directory (``O_NOFOLLOW | O_NONBLOCK``) and
  the OPENED file is ``fstat``-ed: a regular file of root, us or ``owners``, writable by nobody else;
- the load then uses the real path the walk built: every directory on it is trusted and no
  entry on it can be swapped by another user (not even in a sticky directory), and the file
  loaded is checked to be the opened one (same device and inode) first.  Not ``/proc/self/fd/N``:
  the loader takes ``$ORIGIN`` (an extension's RUNPATH) from the name it was given.

A child process (warm's, ``verify --first-run``'s) gets the parent's answer -- the real path and
the opened file's (device, inode) -- and loads with :func:`load_opened`, which refuses a file
that is no longer the one checked.  Stdlib only, Python 3.8, importable by file path
(the children import it so, from cudafix's own install); ``ctypes`` only when something loads.
"""

import os

_IFMT, _IFDIR, _IFREG, _IFLNK, _ISVTX = 0o170000, 0o040000, 0o100000, 0o120000, 0o1000
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_NOFOLLOW | _CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
MAX_LINKS = 40  # symbolic links followed in one walk (the kernel's own limit)


class Opened(object):
    """A file that passed the check: its descriptor, real path and (device, inode)."""

    __slots__ = ("fd", "real", "dev", "ino")

    def __init__(self, fd, real, dev, ino):
        self.fd, self.real, self.dev, self.ino = fd, real, dev, ino

    def close(self):
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None


def _close_all(fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
    del fds[:]


def open_checked(path, owners=(), sticky_ok=False, want_exec=False):
    """(Opened, None) or (None, reason) for the file at ``path`` (absolute), checked as above.
    Never raises for a filesystem reason.  The caller closes the Opened."""
    if not isinstance(path, str) or not path.startswith("/") or "\0" in path:
        return None, "not an absolute path"
    uid = os.geteuid()
    ok = set(owners) | {0, uid}
    parts = path.split("/")[::-1]  # a stack: the next component is last
    stack = []  # descriptors of the directories walked so far
    names = []  # the real path's components, parallel to stack[1:]
    links = 0
    try:
        stack.append(os.open("/", _DIR_FLAGS))
        why = _dir_refusal(os.fstat(stack[-1]), ok, sticky_ok, "/")
        if why:
            return _fail(stack, why)
        while parts:
            name = parts.pop()
            if name in ("", "."):
                continue
            if name == "..":
                if len(stack) > 1:
                    os.close(stack.pop())
                    names.pop()
                continue
            fd = stack[-1]
            here = "/" + "/".join(names + [name])
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            kind = st.st_mode & _IFMT
            if kind == _IFLNK:
                links += 1
                if st.st_uid not in ok:
                    return _fail(stack, "%s is a symbolic link of another user (uid %d)" % (here, st.st_uid))
                if links > MAX_LINKS:
                    return _fail(stack, "%s: too many symbolic links" % path)
                target = os.readlink(name, dir_fd=fd)
                if target.startswith("/"):
                    while len(stack) > 1:
                        os.close(stack.pop())
                    del names[:]
                parts.extend(target.split("/")[::-1])
                continue
            if kind == _IFDIR and parts:
                nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
                stack.append(nfd)
                names.append(name)
                why = _dir_refusal(os.fstat(nfd), ok, sticky_ok, here)
                if why:
                    return _fail(stack, why)
                continue
            if parts:  # a file where a directory was needed
                return _fail(stack, "%s is not a directory" % here)
            ffd = os.open(name, _FILE_FLAGS, dir_fd=fd)
            fst = os.fstat(ffd)
            if fst.st_mode & _IFMT != _IFREG or fst.st_uid not in ok or fst.st_mode & 0o022:
                os.close(ffd)
                return _fail(stack, "%s is not a file of root or the env's owner writable only by them" % here)
            if want_exec and not fst.st_mode & 0o111:
                os.close(ffd)
                return _fail(stack, "%s is not executable" % here)
            own = os.fstat(fd)
            if own.st_mode & 0o022:  # the file's own directory: no sticky exception
                os.close(ffd)
                return _fail(stack, "directory %s can be written by a user other than root or the env's owner"
                             % ("/" + "/".join(names)))
            _close_all(stack)
            return Opened(ffd, here, fst.st_dev, fst.st_ino), None
        return _fail(stack, "%s names a directory, not a file" % path)
    except FileNotFoundError:
        return _fail(stack, "%s: no such file" % path)
    except (OSError, ValueError) as exc:
        return _fail(stack, "%s: %s" % (type(exc).__name__, exc))


def _dir_refusal(st, ok, sticky_ok, here):
    if st.st_mode & _IFMT != _IFDIR:
        return "%s is not a directory" % here
    if st.st_uid not in ok or (st.st_mode & 0o022 and not (sticky_ok and st.st_mode & _ISVTX)):
        return "directory %s can be written by a user other than root or the env's owner" % here
    return None


def _fail(stack, why):
    _close_all(stack)
    return None, why


def refusal(path, owners=(), sticky_ok=False, want_exec=False):
    """None if ``path`` passes :func:`open_checked`, else the reason."""
    opened, why = open_checked(path, owners, sticky_ok, want_exec)
    if opened is not None:
        opened.close()
    return why


def _same_file(real, dev, ino):
    try:
        st = os.stat(real)
    except (OSError, ValueError) as exc:
        return "%s: %s" % (type(exc).__name__, exc)
    if (st.st_dev, st.st_ino) != (dev, ino):
        return "%s changed after it was checked" % real
    return None


def load_opened(real, dev, ino, mode=None):
    """The ctypes handle of the checked file ``real`` if it is still the file (``dev``, ``ino``)
    that was opened and checked; raises OSError otherwise (a load's own failure too)."""
    import ctypes

    why = _same_file(real, dev, ino)
    if why is not None:
        raise OSError(why)
    return ctypes.CDLL(real) if mode is None else ctypes.CDLL(real, mode=mode)


def load(path, owners=(), sticky_ok=False, mode=None):
    """(handle, real, None) or (None, None, reason): ``path`` checked and loaded in one resolution."""
    opened, why = open_checked(path, owners, sticky_ok)
    if opened is None:
        return None, None, why
    try:
        return load_opened(opened.real, opened.dev, opened.ino, mode), opened.real, None
    except OSError as exc:
        return None, None, "cannot load %s: %s" % (opened.real, exc)
    finally:
        opened.close()


def spec_of(path, owners=(), sticky_ok=False):
    """({"path", "real", "dev", "ino"}, None) or (None, reason): what a child needs to load
    ``path`` with :func:`load_opened` (the parent's check, handed on)."""
    opened, why = open_checked(path, owners, sticky_ok)
    if opened is None:
        return None, why
    opened.close()
    return {"path": path, "real": opened.real, "dev": opened.dev, "ino": opened.ino}, None


def load_process():
    """The running program's own namespace (``dlopen(NULL)``): nothing is read from a file."""
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _cdll(name, mode, use_errno=False):
    import ctypes

    if mode is None:
        return ctypes.CDLL(name, use_errno=use_errno)
    return ctypes.CDLL(name, mode=mode, use_errno=use_errno)


def load_soname(soname, ld_library_path=None, owners=(), mode=None, use_errno=False):
    """(handle, None) or (None, reason): ``soname`` as the loader finds it from this process.
    A copy in an ``LD_LIBRARY_PATH`` directory (what the loader would take first) is loaded only
    through the check; an empty or relative entry (the current directory) is never searched.
    Otherwise the loader's own search (ld.so.cache, the default directories: root's)."""
    try:  # already in this process (torch loaded it): the loader answers with that object
        return _cdll(soname, os.RTLD_NOLOAD | (mode or 0), use_errno), None
    except (OSError, AttributeError):
        pass
    for d in (ld_library_path or "").replace(";", ":").split(":"):
        if not d.startswith("/"):
            continue
        cand = os.path.join(d, soname)
        if os.path.lexists(cand):
            lib, _, why = load(cand, owners, True, mode)  # a sticky ancestor (/tmp) as for warm
            return lib, why
    try:
        return _cdll(soname, mode, use_errno), None
    except OSError as exc:
        return None, "%s: %s" % (soname, exc)


def import_extension(name, real, dev, ino):
    """Import the checked Python extension ``real`` as module ``name`` (the child's import of a
    ``--load`` module): the file must still be the one checked."""
    import importlib.machinery
    import importlib.util

    why = _same_file(real, dev, ino)
    if why is not None:
        raise ImportError(why)
    loader = importlib.machinery.ExtensionFileLoader(name, real)
    spec = importlib.util.spec_from_file_location(name, real, loader=loader)
    if spec is None:
        raise ImportError("cannot load %s" % real)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def import_by_path(file_path):
    """This module, imported from its file by a child started with ``-I`` (no sys.path of cudafix)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_cudafix_trustload", file_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
