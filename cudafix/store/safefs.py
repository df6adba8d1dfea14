"""The one trust check and the one way cudafix touches its own files (docs/security.md).

Every cache (hook, fatbin, library simulation, nvcc, session markers) is opened through
:func:`open_dir`, which walks the directory path from ``/`` one component at a time, relative to
the previous directory's file descriptor (``O_DIRECTORY | O_NOFOLLOW``), so no path is ever
resolved twice and nothing can be swapped in between:

- each directory must be owned by root or by us (the effective uid); one writable by group or
  others only as a sticky ancestor (``/tmp``), never as the directory our files live in;
- a symbolic link is followed only if root or we own it (it sits in a directory checked above),
  so another user's link is never followed -- also not by root;
- the last directory must be ours and writable by nobody else; the ones cudafix creates are
  made 0700.

Files in it are then opened relative to that descriptor: ``lstat`` first (a FIFO, a device or a
link is refused before any open), ``O_NOFOLLOW | O_NONBLOCK``, and ``fstat`` again: a regular
file of ours, writable by nobody else.  Writes go to a new temporary file (``O_EXCL``) renamed
over the old one.  :func:`safe_to_load` is the same check for a library cudafix preloads.

Stdlib only, Python 3.8, no module-level imports beyond ``os`` (it runs at ``import torch``).
"""

import os

_IFMT, _IFDIR, _IFREG, _IFLNK, _ISVTX = 0o170000, 0o040000, 0o100000, 0o120000, 0o1000
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_NOFOLLOW | _CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
MAX_LINKS = 40  # symbolic links followed in one walk (the kernel's own limit)
# The working directory of every process cudafix starts (docs/security.md, "Processes"): `-m` and
# `-c` put the current directory first on sys.path, and an empty or relative PYTHONPATH entry
# names it too, so a child started in /tmp or a shared project directory would import a planted
# cudafix/, json.py or sitecustomize.py.  `/` is root's; unlike -I it keeps PYTHONPATH and the
# user site, where the user's own programs find torch (and -P needs Python 3.11).
CHILD_CWD = "/"


def trusted(st, uid, want_dir):
    """Ours (``uid``), of the right kind (directory / regular file), writable by nobody else."""
    return st.st_mode & 0o170022 == (_IFDIR if want_dir else _IFREG) and st.st_uid == uid


def _ancestor_ok(st, uid):
    """A directory on the way: root's or ours; writable by others only if sticky (/tmp)."""
    return st.st_mode & _IFMT == _IFDIR and st.st_uid in (0, uid) and (not st.st_mode & 0o022 or st.st_mode & _ISVTX)


def open_dir(path, create=False, uid=None):
    """A descriptor of directory ``path`` (absolute) that passed the checks above, or None.

    ``create``: make the missing directories (0700).  The caller closes the descriptor.
    Never raises for a filesystem reason (None then); ``why_not`` says which.
    """
    fd, _ = open_dir_why(path, create, uid)
    return fd


def open_dir_why(path, create=False, uid=None):
    """(descriptor, None) or (None, reason): :func:`open_dir` with its reason."""
    if not isinstance(path, str) or not path.startswith("/") or "\0" in path:
        return None, "not an absolute path"
    uid = os.geteuid() if uid is None else uid
    parts = path.split("/")[::-1]  # a stack: the next component is last
    stack = []  # descriptors of the directories walked so far ("..": pop)
    links = 0
    try:
        stack.append(os.open("/", _DIR_FLAGS))
        while parts:
            name = parts.pop()
            if name in ("", "."):
                continue
            if name == "..":
                if len(stack) > 1:
                    os.close(stack.pop())
                continue
            fd = stack[-1]
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                if not create:
                    return _close(stack, "%s: no such directory" % name)
                try:
                    os.mkdir(name, 0o700, dir_fd=fd)
                except FileExistsError:
                    pass
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if st.st_mode & _IFMT == _IFLNK:
                links += 1
                if st.st_uid not in (0, uid):
                    return _close(stack, "%s: a symbolic link of another user (uid %d)" % (name, st.st_uid))
                if links > MAX_LINKS:
                    return _close(stack, "too many symbolic links")
                target = os.readlink(name, dir_fd=fd)
                if target.startswith("/"):
                    while len(stack) > 1:
                        os.close(stack.pop())
                parts.extend(target.split("/")[::-1])
                continue
            nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            stack.append(nfd)
            st = os.fstat(nfd)
            if not _ancestor_ok(st, uid):
                return _close(stack, "%s: not a directory of root or uid %d, or writable by others" % (name, uid))
        last = os.fstat(stack[-1])
        if not trusted(last, uid, True):
            return _close(stack, "%s: not a directory of uid %d writable only by it" % (path, uid))
        fd = stack.pop()
        _close(stack, None)
        return fd, None
    except (OSError, ValueError) as exc:
        return _close(stack, "%s: %s" % (type(exc).__name__, exc))


def _close(fds, why):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
    del fds[:]
    return None, why


def read_file(dfd, name, max_bytes, uid=None):
    """(bytes, None) or (None, reason): ``name`` in directory ``dfd`` if it is a regular file of
    ours writable by nobody else and at most ``max_bytes`` long.  Never blocks (a FIFO is refused
    by lstat, and O_NONBLOCK covers a swap after it), never follows a link, never raises."""
    uid = os.geteuid() if uid is None else uid
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        if not trusted(st, uid, False):
            return None, "%s: not a regular file of uid %d writable only by it" % (name, uid)
        fd = os.open(name, _FILE_FLAGS, dir_fd=dfd)
        try:
            st = os.fstat(fd)
            if not trusted(st, uid, False):
                return None, "%s: not a regular file of uid %d writable only by it" % (name, uid)
            if st.st_size > max_bytes:
                return None, "%s: larger than %d bytes" % (name, max_bytes)
            chunks, left = [], st.st_size + 1
            while left > 0:
                b = os.read(fd, left)
                if not b:
                    break
                chunks.append(b)
                left -= len(b)
            data = b"".join(chunks)
        finally:
            os.close(fd)
        if len(data) > max_bytes:
            return None, "%s: larger than %d bytes" % (name, max_bytes)
        return data, None
    except FileNotFoundError:
        return None, "no such file"
    except (OSError, ValueError) as exc:
        return None, "%s: %s" % (type(exc).__name__, exc)


def write_file(dfd, name, data, mode=0o600):
    """Replace ``name`` in directory ``dfd`` by a whole new file (``O_EXCL`` temporary + rename):
    readers see the old file or the new one.  Raises OSError; no temporary file stays behind."""
    tmp = ".%s.%s.tmp" % (name, os.urandom(6).hex())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC, 0o600, dir_fd=dfd)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if mode != 0o600:
                os.fchmod(fd, mode)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
        raise


def create_once(dfd, name):
    """True if this call created the empty file ``name`` in ``dfd`` (``O_CREAT | O_EXCL``: of
    racing callers exactly one wins); False if it exists or cannot be made."""
    try:
        os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC, 0o600, dir_fd=dfd))
        return True
    except OSError:
        return False


def open_private(path, flags=os.O_WRONLY | os.O_APPEND):
    """(descriptor, None) or (None, reason): the file at ``path`` opened with ``flags`` (created
    0600 when missing) in a directory :func:`open_dir` trusts (made 0700 as needed).  The file
    must be a regular file of ours writable by nobody else: never through a link (O_NOFOLLOW,
    also not another user's link in /tmp/cudafix-<uid>), never a FIFO (lstat first, O_NONBLOCK),
    never another user's file.  For warm.log and warm.lock; the caller closes the descriptor."""
    d, why = open_dir_why(os.path.dirname(path), create=True)
    if d is None:
        return None, why
    name = os.path.basename(path)
    uid = os.geteuid()
    try:
        try:
            st = os.stat(name, dir_fd=d, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None and not trusted(st, uid, False):
            return None, "%s: not a regular file of uid %d writable only by it" % (path, uid)
        fd = os.open(name, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC, 0o600, dir_fd=d)
        st = os.fstat(fd)
        if not trusted(st, uid, False):
            os.close(fd)
            return None, "%s: not a regular file of uid %d writable only by it" % (path, uid)
        return fd, None
    except (OSError, ValueError) as exc:
        return None, "%s: %s" % (type(exc).__name__, exc)
    finally:
        os.close(d)


def open_private_file(path):
    """(file object for appending, None) or (None, reason): :func:`open_private` as a file."""
    fd, why = open_private(path)
    return (None, why) if fd is None else (os.fdopen(fd, "ab"), None)


def new_private_dir_file(name, data, prefix):
    """A new private directory (mkdtemp: 0700, unpredictable name, in TMPDIR) holding the new file
    ``name`` (``O_EXCL | O_NOFOLLOW``, 0600) with ``data``; returns the directory."""
    import tempfile

    d = tempfile.mkdtemp(prefix=prefix)
    fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    return d


def read_private(path, max_bytes):
    """(bytes, None) or (None, reason) for the file at ``path`` through :func:`open_dir`."""
    d, why = open_dir_why(os.path.dirname(path))
    if d is None:
        return None, why
    try:
        return read_file(d, os.path.basename(path), max_bytes)
    finally:
        os.close(d)


def write_private(path, data, mode=0o600):
    """True when ``data`` replaced the file at ``path`` (directories made 0700 as needed)."""
    d = open_dir(os.path.dirname(path), create=True)
    if d is None:
        return False
    try:
        write_file(d, os.path.basename(path), data, mode)
        return True
    except OSError:
        return False
    finally:
        os.close(d)


def stat_sig(path):
    """What a re-stat compares to tell a file unchanged: [mode, dev, ino, size, mtime_ns, ctime_ns]
    (following links), None when ``path`` cannot be stat'ed.  The one signature of every cache."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return [st.st_mode, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def sig_mtime_ns(sig):
    """The mtime_ns of a :func:`stat_sig` (None for None or a malformed one)."""
    try:
        return int(sig[4])
    except (TypeError, IndexError, ValueError):
        return None


def safe_to_load(path, owners=(0,), sticky_ok=False):
    """None if the library at ``path`` may be loaded into this process, else the reason.

    It must be an absolute path whose real file, every directory above it and every directory
    holding a link on the way are owned by root, us or one of ``owners`` (the env's owner:
    whoever can already change torch) and writable by nobody else -- no sticky exception for a
    preload: it never comes from /tmp or the current dir.  ``sticky_ok`` (warm, which loads what
    the user's own program would): a sticky directory writable by others (/tmp, which holds
    torch's default TORCH_EXTENSIONS_DIR) may sit above the module's own directory, since nobody
    else can rename or replace an entry of ours in it.  The one check: store/trustload.py (which
    also loads: a check here followed by a load elsewhere is two resolutions, issue 36 H1).
    """
    from cudafix.store import trustload

    return trustload.refusal(path, owners, sticky_ok)


def env_owners(prefix):
    """(owner of the env at ``prefix``,): who can already change torch there, or ()."""
    try:
        return (os.stat(prefix).st_uid,)
    except (OSError, ValueError):
        return ()


def preload_refusal(path, ld_library_path, owners=()):
    """None if cudafix may preload ``path`` (RTLD_GLOBAL) in this process, else why not:
    :func:`safe_to_load`, and never from the current directory or a relative dir that an empty
    or relative ``LD_LIBRARY_PATH`` entry names (the loader's value, at exec)."""
    why = safe_to_load(path, owners)
    if why is not None:
        return why
    real_dir = os.path.dirname(os.path.realpath(path))
    # (glibc ignores an unset or empty LD_LIBRARY_PATH: no entry, not the current directory)
    for entry in ld_library_path.replace(";", ":").split(":") if ld_library_path else ():
        if not entry.startswith("/") and os.path.realpath(entry or ".") == real_dir:
            return "%s is the current directory or relative (LD_LIBRARY_PATH entry %r)" % (real_dir, entry)
    return None
