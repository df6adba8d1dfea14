"""The one way cudafix runs work in child processes: fork, run a function, send its return value
back pickled through a pipe, leave with ``os._exit``.

Used by the probes that run ahead of `status` (cudafix/probes/ahead.py), the split walk and scan
of the extension probe (:func:`split_work`) and `cudafix fleet --from DIR` (cudafix/fleet/parallel.py).
It imports nothing of cudafix's, so any module may import it before it forks.  Whether to fork
at all is the caller's: :func:`unsafe` says where it must not, ``CUDAFIX_JOBS`` (read by
cudafix/knowledge/knobs.py ``jobs``) how many processes the user allows.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Optional, Set, Tuple


class Child:
    """One forked child running one function; ``take()`` waits for its answer."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid, self.fd = pid, fd
        self._done = False
        self._answer: Optional[Tuple[bool, Any]] = None

    def take(self) -> Optional[Tuple[bool, Any]]:
        """``(True, value)``, ``(False, "Type: message")`` (the function raised), or None: no
        answer (the child died, or sent what cannot be read): the caller does the work itself."""
        if not self._done:
            self._done = True
            chunks: List[bytes] = []
            try:
                while True:
                    chunk = os.read(self.fd, 1 << 20)
                    if not chunk:
                        break
                    chunks.append(chunk)
            except OSError:
                chunks = []
            finally:
                os.close(self.fd)
                HELD.discard(self.fd)
                _reap(self.pid)
            if chunks:
                try:
                    from _pickle import loads  # pickle's C half: a third of `import pickle`
                except ImportError:
                    from pickle import loads
                try:
                    got = loads(b"".join(chunks))
                except Exception:  # a child killed mid-write
                    got = None
                if isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], bool):
                    self._answer = got
        return self._answer

    def release(self) -> None:
        """Another process reads the answer (it holds the pipe's read end): close ours, and wait
        for the child at this process's exit."""
        os.close(self.fd)
        HELD.discard(self.fd)
        self._done = True
        _pending(self.pid)


# The read ends of this process's children (and, in a child, its write end to its parent): a
# child closes the ones it inherits, or a parent's read would wait for the grandchildren's exit.
HELD: Set[int] = set()
# Children that answered but had not exited when asked: waited for at this process's exit.
_PENDING: List[int] = []


def _reap(pid: int) -> None:
    """Wait for a child that has answered, without blocking: after its answer a child may still
    tear down (NVML's shutdown), which the caller need not wait for (:func:`reap_all`)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except (OSError, InterruptedError):
        return
    if done == 0:
        _pending(pid)


def _pending(pid: int) -> None:
    if not _PENDING:
        import atexit

        atexit.register(reap_all)
    _PENDING.append(pid)


def reap_all() -> None:
    """Wait for every child that answered (a process's exit: none is left a zombie)."""
    while _PENDING:
        try:
            os.waitpid(_PENDING.pop(), 0)
        except (OSError, InterruptedError):
            pass


def cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def unsafe() -> Optional[str]:
    """None where forking is safe and useful here, else why not (one line)."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return "not Linux"
    try:
        threads = len(os.listdir("/proc/self/task"))
    except OSError:
        return "/proc/self/task is not readable"
    if threads != 1:
        # a child of a threaded process may inherit a lock some other thread held (malloc, stdio, import)
        return "%d threads in this process" % threads
    if cpus() < 2:
        return "one CPU: nothing would run beside the parent"
    return None


def fork(work: Callable[[], Any], after: Optional[Callable[[], None]] = None, keep: Tuple[int, ...] = ()) -> Optional[Child]:
    """A child running ``work``; once its answer is sent (and its end of the pipe closed, so the
    parent reads it at once) it runs ``after`` and waits for children of its own.  ``keep``: read
    ends of other children this one is to read (every other one it inherits, it closes).
    None: no pipe or no process could be had; the caller does the work itself."""
    try:
        r, w = os.pipe()
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:  # a process limit, a seccomp profile
        os.close(r)
        os.close(w)
        return None
    if pid == 0:  # the child: run, answer, leave without running anything of the parent's
        code = 1
        try:
            for fd in [r] + sorted(HELD.difference(keep)):
                os.close(fd)
            HELD.clear()
            HELD.update((w,) + tuple(keep))
            _PENDING[:] = []  # the parent's children are not this one's to wait for
            try:
                answer: Tuple[bool, Any] = (True, work())
            except Exception as exc:
                answer = (False, "%s: %s" % (type(exc).__name__, exc))
            import pickle

            data = memoryview(pickle.dumps(answer, pickle.HIGHEST_PROTOCOL))
            while data:
                data = data[os.write(w, data):]
            os.close(w)
            code = 0
            if after is not None:
                after()
        except BaseException:  # KeyboardInterrupt, a closed pipe: no answer, the parent works itself
            pass
        finally:
            try:
                reap_all()
            finally:
                os._exit(code)
    os.close(w)
    HELD.add(r)
    return Child(pid, r)


def split_work(items: List[Tuple[Any, int]], workers: int, work: Callable[[List[Any]], Dict[str, Any]],
               min_items: int) -> Dict[str, Any]:
    """``work`` over ``items`` ((item, weight)) in ``workers`` processes, this one and children,
    where there are ``min_items`` or more and forking is safe here: the answers merged ({} where
    nothing was split).  The items wait in a queue, the heaviest first, and each process takes
    the next one when it is free: a weight (a file's size) says little of an item's time, so
    shares fixed beforehand left processes idle while one worked on.  What no child answered for
    is left out: the caller does it itself."""
    if workers < 2 or len(items) < min_items or unsafe() is not None:
        return {}
    order = sorted(range(len(items)), key=lambda i: -items[i][1])
    queue = _queue(order)
    if queue is None:  # the queue did not fit in a pipe: fixed shares, each about the same weight
        shares: List[List[Any]] = [[] for _ in range(workers)]
        load = [0] * workers
        for i in order:
            j = load.index(min(load))
            shares[j].append(items[i][0])
            load[j] += items[i][1]
        children = [fork(lambda share=share: work(share)) for share in shares[1:]]
        try:
            out = work(shares[0])
        finally:
            answers = [c.take() if c is not None else None for c in children]
    else:
        def pull() -> Dict[str, Any]:
            got: Dict[str, Any] = {}
            while True:
                # a pipe's read takes whole records here: every record is 4 bytes, every read asks for 4
                record = os.read(queue, 4)
                if len(record) < 4:
                    return got
                got.update(work([items[int.from_bytes(record, "little")][0]]))

        children = []
        try:
            children = [fork(pull) for _ in range(workers - 1)]
            out = pull()
        finally:
            os.close(queue)
            answers = [c.take() if c is not None else None for c in children]  # waited for, whatever happened here
    for got in answers:
        if got is not None and got[0]:
            out.update(got[1])
    return out


def _queue(order: List[int]) -> Optional[int]:
    """The read end of a pipe holding ``order`` (4-byte records, the write end closed: a reader
    meets its end once it is empty), or None where it does not fit the pipe's buffer (64 KiB by
    default; less where the user's pipe pages run short, pipe(7))."""
    data = b"".join(i.to_bytes(4, "little") for i in order)
    try:
        r, w = os.pipe()
    except OSError:
        return None
    try:
        os.set_blocking(w, False)
        written = os.write(w, data)
    except OSError:
        written = -1
    os.close(w)
    if written != len(data):
        os.close(r)
        return None
    return r
