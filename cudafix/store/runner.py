"""The one trusted runner: the only way cudafix executes a program (issue 36).

Every program cudafix runs -- nvcc, c++filt, srun, pip, the target interpreter, verify's
children, the user's own ``verify -- CMD`` -- runs through :func:`run` (or :func:`run_all` for
ranks started together, :func:`spawn_detached` for the background warm), which gives each the
same guarantees:

- the executable is resolved once (an absolute ``PATH`` entry only: never the current directory)
  and, unless the caller named it itself (``verify -- CMD``), must pass the trusted loader's check
  (store/trustload.py: a file of root, us or ``owners`` in directories nobody else can write, no
  other user's link on the way) -- root never runs another user's nvcc;
- ``cwd=/`` (``-m`` / ``-c`` / a script's imports never see the caller's directory), stdin closed,
  a Python child started with ``-I`` (:func:`python_argv`), descriptors closed;
- its own process group (a new session): on the timeout, on SIGTERM or SIGINT to cudafix, and
  whenever the program itself has exited, the whole group is killed -- a grandchild holding the
  output pipe neither keeps cudafix waiting nor keeps running;
- bounded output: the first and the last ``max_output // 2`` bytes of each stream are kept, the
  middle counted and dropped (``yes`` cannot exhaust memory);
- SIGTERM becomes :class:`Terminated` (a SystemExit, status 143) while a child runs, so the
  caller's ``finally`` removes its temporary caches as it does for SIGINT's KeyboardInterrupt.

Stdlib only, Python 3.8.
"""

import os
import selectors
import signal
import subprocess
import threading
import time

from cudafix.store import trustload

DEFAULT_MAX_OUTPUT = 4 << 20  # bytes kept per stream (head + tail)
EXIT_GRACE_S = 0.5  # once the program has exited: how long its output may still drain


class RunRefused(OSError):
    """The executable failed the check (not run)."""


class Terminated(SystemExit):
    """cudafix got SIGTERM while a child ran (the child's group is killed first)."""

    def __init__(self):
        SystemExit.__init__(self, 128 + signal.SIGTERM)


class Bounded(object):
    """A stream's first and last bytes, and how many in between were dropped."""

    def __init__(self, limit):
        self.half = max(1, limit // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, data):
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            over = len(self.tail) - self.half
            if over > 0:
                del self.tail[:over]
                self.dropped += over

    def value(self):
        if not self.dropped:
            return bytes(self.head + self.tail)
        return bytes(self.head) + b"\n[... %d bytes left out ...]\n" % self.dropped + bytes(self.tail)


class Result(object):
    __slots__ = ("argv", "returncode", "stdout", "stderr", "timed_out", "seconds", "dropped")

    def __init__(self, argv):
        self.argv = argv
        self.returncode = None
        self.stdout = b""
        self.stderr = b""
        self.timed_out = False
        self.seconds = 0.0
        self.dropped = 0

    def text(self, which="stdout"):
        return getattr(self, which).decode("utf-8", "replace")


def python_argv(python, *args):
    """The argv of a Python child: ``-I`` (no PYTHONPATH, no user site, no script or current
    directory on sys.path), then ``args``."""
    return [python, "-I"] + list(args)


def resolve(prog, env=None, owners=(), check=True, cwd="/"):
    """The absolute path ``prog`` runs as (PATH's absolute entries only), checked unless ``check``
    is False; raises RunRefused.  A relative path (``./train.sh``) only for a program the caller
    named itself (``check`` False), in its ``cwd``."""
    if "/" in prog:
        path = prog if prog.startswith("/") else (os.path.join(cwd, prog) if not check else None)
        if path is None:
            raise RunRefused("%s: a relative program path is never run (cudafix runs in /)" % prog)
    else:
        path = None
        search = ((env if env is not None else os.environ).get("PATH") or os.defpath).split(os.pathsep)
        for d in search:
            if not d.startswith("/"):
                continue  # an empty or relative entry names the current directory
            cand = os.path.join(d, prog)
            if os.path.isfile(cand) and os.access(cand, os.X_OK):
                path = cand
                break
        if path is None:
            raise RunRefused("%s: not found on PATH" % prog)
    if check:
        # a sticky ancestor (/tmp) as for warm: nobody else can rename an entry of ours in it
        why = trustload.refusal(path, owners, sticky_ok=True, want_exec=True)
        if why is not None:
            raise RunRefused("%s not run: %s" % (path, why))
    return path


class Job(object):
    """One program to run: argv, env, where its output goes."""

    def __init__(self, argv, env=None, check_exe=True, owners=(), merge_stderr=False, max_output=DEFAULT_MAX_OUTPUT,
                 pass_fds=(), stdout_fd=None, cwd="/", stderr_fd=None):
        self.argv = list(argv)
        self.cwd = cwd
        self.env = env
        self.check_exe = check_exe
        self.owners = owners
        self.merge_stderr = merge_stderr
        self.max_output = max_output
        self.pass_fds = tuple(pass_fds)
        self.stdout_fd = stdout_fd
        self.stderr_fd = stderr_fd if stderr_fd is not None else stdout_fd
        self.proc = None
        self.result = Result(self.argv)
        self.out = Bounded(max_output)
        self.err = Bounded(max_output)
        self.exited_at = None


def _start(job):
    exe = resolve(job.argv[0], job.env, job.owners, job.check_exe, job.cwd)
    out = job.stdout_fd if job.stdout_fd is not None else subprocess.PIPE
    err = subprocess.STDOUT if job.merge_stderr else (job.stderr_fd if job.stderr_fd is not None else subprocess.PIPE)
    job.proc = subprocess.Popen(job.argv, executable=exe, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                env=job.env, cwd=job.cwd, start_new_session=True, close_fds=True, pass_fds=job.pass_fds)


def kill_group(proc):
    """SIGKILL the child's whole process group (it leads its own session); never raises."""
    if proc is None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (OSError, ProcessLookupError):
        pass
    try:
        proc.kill()
    except OSError:
        pass


class _SignalGuard(object):
    """SIGTERM raises Terminated while children run (main thread only: elsewhere, a no-op)."""

    def __enter__(self):
        self.old = None
        if threading.current_thread() is threading.main_thread():
            try:
                self.old = signal.signal(signal.SIGTERM, self._raise)
            except (ValueError, OSError):
                self.old = None
        return self

    @staticmethod
    def _raise(signum, frame):
        raise Terminated()

    def __exit__(self, *exc):
        if self.old is not None:
            signal.signal(signal.SIGTERM, self.old)
        return False


class _Deferred(object):
    """SIGINT and SIGTERM held back while one child is started, then acted on as the handlers in
    force would have: a signal that lands inside ``Popen`` -- after the fork, before ``job.proc``
    is set -- would otherwise leave a child nobody kills (seen once under load, issue 36).  Python
    handlers, not a blocked mask: the child must not inherit blocked signals.  Main thread only."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __enter__(self):
        self.old, self.pending = {}, None
        if threading.current_thread() is threading.main_thread():
            for s in self.SIGNALS:
                try:
                    self.old[s] = signal.signal(s, self._note)
                except (ValueError, OSError):
                    pass
        return self

    def _note(self, signum, frame):
        if self.pending is None:
            self.pending = signum

    def __exit__(self, *exc):
        for s, h in self.old.items():
            signal.signal(s, h)
        h = self.old.get(self.pending) if self.pending is not None else None
        if callable(h):
            h(self.pending, None)  # KeyboardInterrupt (default_int_handler), Terminated (_SignalGuard)
        elif h == signal.SIG_DFL:
            os.kill(os.getpid(), self.pending)
        return False


def run_all(jobs, timeout, tick=None, tick_every=0.25):
    """Run ``jobs`` together; returns their Results (in order).  ``tick(elapsed)`` is called about
    every ``tick_every`` seconds.  Raises RunRefused (nothing started) or OSError (a start failed:
    those already started are killed)."""
    start = time.monotonic()
    with _SignalGuard():
        sel = selectors.DefaultSelector()
        try:
            for job in jobs:
                with _Deferred():
                    _start(job)
                for f, buf in ((job.proc.stdout, job.out), (job.proc.stderr, job.err)):
                    if f is not None:
                        os.set_blocking(f.fileno(), False)
                        sel.register(f, selectors.EVENT_READ, (job, buf))
            _pump(jobs, sel, start, timeout, tick, tick_every)
        finally:
            for job in jobs:
                kill_group(job.proc)
            for key in list(sel.get_map().values()):
                sel.unregister(key.fileobj)
                key.fileobj.close()
            sel.close()
            for job in jobs:
                if job.proc is not None:
                    try:
                        job.proc.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        pass
    el = time.monotonic() - start
    for job in jobs:
        r = job.result
        r.returncode = job.proc.returncode if not r.timed_out else 124
        r.stdout, r.stderr = job.out.value(), job.err.value()
        r.dropped = job.out.dropped + job.err.dropped
        r.seconds = round(el, 4)
    return [j.result for j in jobs]


def _pump(jobs, sel, start, timeout, tick, tick_every):
    last_tick = start
    while True:
        now = time.monotonic()
        for job in jobs:
            if job.exited_at is None and job.proc.poll() is not None:
                job.exited_at = now
        open_jobs = {key.data[0] for key in sel.get_map().values()}
        # done: every program exited and its pipes drained, or drained for EXIT_GRACE_S (what is
        # left holding the pipe is a grandchild of its group: killed in run_all's finally)
        if all(j.exited_at is not None and (j not in open_jobs or now - j.exited_at > EXIT_GRACE_S) for j in jobs):
            return
        if now - start > timeout:
            for job in jobs:
                if job.exited_at is None:
                    job.result.timed_out = True
            return
        if tick is not None and now - last_tick >= tick_every:
            last_tick = now
            tick(now - start)
        if not sel.get_map():
            time.sleep(0.05)
            continue
        for key, _ in sel.select(timeout=0.05):
            job, buf = key.data
            try:
                data = os.read(key.fileobj.fileno(), 65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if data:
                buf.add(data)
            else:
                sel.unregister(key.fileobj)
                key.fileobj.close()


def run(argv, timeout, env=None, check_exe=True, owners=(), merge_stderr=False, max_output=DEFAULT_MAX_OUTPUT,
        tick=None, pass_fds=(), cwd="/"):
    """Run one program (see the module's docstring); its Result.  ``returncode`` 124 and
    ``timed_out`` when it ran past ``timeout`` seconds (its group killed).  ``cwd``: ``/`` but for
    the user's own command (``verify -- CMD`` runs where the user typed it)."""
    job = Job(argv, env, check_exe, owners, merge_stderr, max_output, pass_fds, cwd=cwd)
    return run_all([job], timeout, tick)[0]


def run_streamed(argv, timeout, out_fd, err_fd, env=None, owners=()):
    """Run one program whose output goes straight to ``out_fd`` / ``err_fd`` (an installer's own
    progress, `cudafix fix`); its Result (no output kept)."""
    job = Job(argv, env, True, owners, stdout_fd=out_fd, stderr_fd=err_fd)
    return run_all([job], timeout)[0]


def spawn_detached(argv, env, out_fd, owners=()):
    """Start ``argv`` detached (its own session, cwd /, stdin closed, stdout and stderr to
    ``out_fd``) and return without waiting: the background warm."""
    exe = resolve(argv[0], env, owners, True)
    subprocess.Popen(list(argv), executable=exe, stdin=subprocess.DEVNULL, stdout=out_fd, stderr=out_fd, env=env,
                     start_new_session=True, close_fds=True, cwd="/")
