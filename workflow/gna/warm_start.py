"""Warm start: a local run's model jobs fork from one interpreter that has already imported torch,
transformers and lm-eval, instead of importing them again in every job.

A model job spends ~4-5 s importing before any work (torch 1.3 s, transformers' modeling code
2.5 s, lm-eval's evaluator, torch's inductor for the deterministic switch); at micro scale that is
a third of the study's summed job time (issue 25). With ``warm_start: true`` in the config (the
micro study's; off at paper scale, where a job is GPU-hours), a model script's first line,
:func:`hand_over`, passes the job to a server process:

- the job's process (the *client*) connects to the server over a Unix socket, sending its
  script, working directory, environment, ``sys.argv`` / ``sys.path`` and its stdin/stdout/stderr
  (the descriptors themselves, ``SCM_RIGHTS``);
- the server forks; the child takes the client's descriptors, directory and environment and runs
  the script, Snakemake's preamble included, as the job would have: same code, same ``snakemake``
  object, same outputs, byte for byte (tests/test_warm_start.py);
- the client waits, forwards SIGINT / SIGTERM / SIGHUP to the child, and exits with the child's
  status (or dies of its signal); Snakemake sees an ordinary job of the same duration.

The first job that finds no server starts one (detached, its log in
``.snakemake/gna-warm-start.log``) and waits for it, so no job imports twice. The server exits
after ``IDLE_S`` seconds without a job. Its address is a Linux abstract socket named by a digest
of what an import depends on: the interpreter, gna's source files (path, size, mtime), the
installed torch / transformers / lm-eval, the user, and the environment (an edited module or a
changed variable gets a fresh server; a stale one idles out). The server serves only its own user
(``SO_PEERCRED``) and forks only while it has a single thread (a fork is then safe: no lock can be
held by a thread the child lacks). Anywhere this cannot work (not Linux, a SLURM job, a test's
stand-in ``snakemake`` object, the server failing to start) the job runs in its own process as
before: a cold start, never a failure.

``python -m gna.warm_start serve NAME`` is the server (what :func:`hand_over` starts).
"""
from __future__ import annotations

import array
import contextlib
import hashlib
import json
import os
import signal
import socket
import struct
import sys
import time
from importlib.util import find_spec
from pathlib import Path

IDLE_S = 60.0  # the server exits after this long without a job
START_WAIT_S = 10.0  # a client waits this long for a server it started to listen
PID_WAIT_S = 120.0  # ... and this long for the server to fork its job (it may still be importing)
# The environment a job runs in is its own (the child takes it whole); these variables differ from
# job to job or test to test without changing what an import does, so they do not name a server.
VOLATILE_ENV = ("PYTEST_CURRENT_TEST", "_", "OLDPWD", "PWD", "SHLVL", "COLUMNS", "LINES")
# What the server imports before it serves: the imports of every model script (gna's own are
# walked: every module of the package).
PRELOAD = ("torch", "torch._inductor", "transformers", "transformers.modeling_utils", "transformers.generation",
           "lm_eval", "lm_eval.evaluator", "lm_eval.models.huggingface", "lm_eval.tasks", "pandas")
SINGLE_THREADED_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "JE_ARROW_MALLOC_CONF": "background_thread:false"}
_in_child = False  # set in a forked job: its script's hand_over() is then a no-op


# ------------------------------------------------------------------------------------ the client

def hand_over(snakemake) -> None:
    """Run this Snakemake script job in a fork of the warm server and end this process with its
    status; return (a cold start) where warm start is off or cannot work here."""
    if not _wanted(snakemake):
        return
    name = server_name()
    conn = _connect(name)
    if conn is None:
        if not _start_server(name):
            return
        conn = _connect(name, wait=START_WAIT_S)
        if conn is None:
            return
    try:
        pid = _submit(conn)
    except OSError:
        conn.close()
        return  # the server went away before forking: run here
    status = _wait(conn, pid)
    _exit_like(status)


def _wanted(snakemake) -> bool:
    if _in_child or not sys.platform.startswith("linux") or os.environ.get("SLURM_JOB_ID"):
        return False
    from .pipeline import _is_script_job

    if not _is_script_job(snakemake):  # a test's stand-in, or a batch's condition (gna.condition_batches)
        return False
    return bool((getattr(snakemake, "config", None) or {}).get("warm_start"))


def server_name() -> str:
    """The abstract socket address of the server for this interpreter, gna source, packages,
    user and environment."""
    h = hashlib.sha256()
    pkg = Path(__file__).resolve().parent
    h.update(f"{sys.executable}\0{sys.version}\0{pkg}\0{os.getuid()}\0".encode())
    for p in sorted(pkg.rglob("*.py")):
        st = p.stat()
        h.update(f"{p.relative_to(pkg)}:{st.st_size}:{st.st_mtime_ns}\0".encode())
    for mod in ("torch", "transformers", "lm_eval"):
        spec = find_spec(mod)
        if spec is not None and spec.origin:
            st = os.stat(spec.origin)
            h.update(f"{mod}:{spec.origin}:{st.st_mtime_ns}\0".encode())
    env = {k: v for k, v in os.environ.items() if k not in VOLATILE_ENV}
    h.update(json.dumps(env, sort_keys=True).encode())
    return f"\0gna-warm-start-{h.hexdigest()[:32]}"


def _connect(name: str, wait: float = 0.0) -> socket.socket | None:
    deadline = time.monotonic() + wait
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(name)
            return s
        except OSError:
            s.close()
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.02)


def _start_server(name: str) -> bool:
    """Start a detached server for ``name`` (it exits at once if another one already holds it)."""
    import subprocess

    log = Path(".snakemake") / "gna-warm-start.log"
    try:
        log.parent.mkdir(exist_ok=True)
        out = open(log, "ab")
    except OSError:
        out = subprocess.DEVNULL
    env = dict(os.environ)  # the server imports gna from where this job did
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    try:
        subprocess.Popen([sys.executable, "-m", "gna.warm_start", "serve", name[1:]], stdin=subprocess.DEVNULL,
                         stdout=out, stderr=out, env=env, start_new_session=True, close_fds=True)
    except OSError:
        return False
    finally:
        if out is not subprocess.DEVNULL:
            out.close()
    return True


def _submit(conn: socket.socket) -> int:
    """Send the job (and this process's stdin, stdout, stderr); return the forked child's pid."""
    sys.stdout.flush()
    sys.stderr.flush()
    request = json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "env": dict(os.environ), "path": sys.path}).encode()
    fds = array.array("i", [0, 1, 2])
    conn.sendmsg([struct.pack("!I", len(request)) + request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
    conn.settimeout(PID_WAIT_S)  # a server still importing answers within seconds; a stuck one: run cold
    line = _read_line(conn)
    conn.settimeout(None)
    if not line.startswith("pid "):
        raise OSError(f"warm start: unexpected reply {line!r}")
    return int(line.split()[1])


def _wait(conn: socket.socket, pid: int) -> str:
    """Forward this process's termination signals to the child; return its status line."""
    def forward(sig, frame):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)
    try:
        return _read_line(conn)
    except OSError:
        return ""


def _exit_like(status: str) -> None:
    """End this process as the child ended: its exit code, or its signal."""
    kind, _, value = status.partition(" ")
    if kind == "signal":
        sig = int(value)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    if kind == "exit":
        os._exit(int(value))
    print("warm start: the server ended before the job did (see .snakemake/gna-warm-start.log)", file=sys.stderr)
    os._exit(1)


def _read_line(conn: socket.socket) -> str:
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = conn.recv(256)
        if not chunk:
            break
        buf += chunk
    return buf.decode().strip()


# ------------------------------------------------------------------------------------ the server

def preload() -> list[str]:
    """Import what the model scripts import; return the modules that failed (an optional
    dependency: the job imports it itself, or fails as it would have)."""
    import importlib
    import pkgutil

    import gna

    failed = []
    names = list(PRELOAD) + sorted(m.name for m in pkgutil.walk_packages(gna.__path__, "gna."))
    for mod in names:
        try:
            importlib.import_module(mod)
        except Exception as e:  # noqa: BLE001 - the job meets it again, with its own traceback
            failed.append(f"{mod} ({type(e).__name__}: {e})")
    return failed


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def serve(name: str, idle_s: float = IDLE_S) -> None:
    """Listen on abstract socket ``name``; fork a child per job until ``idle_s`` without one."""
    import selectors

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(name)
    except OSError:
        return  # another job started the same server first
    listener.listen(64)  # bound before the imports: a job connecting now waits for them, not imports itself
    # The server must stay single-threaded to fork safely: torch's OpenMP runtime starts its workers
    # when imported unless told one thread (the jobs set their own: gna.pipeline.job), and pyarrow's
    # jemalloc (lm-eval -> datasets) a background purging thread unless told not to.
    os.environ.update(SINGLE_THREADED_ENV)
    log(f"pid {os.getpid()}: importing")
    start = time.time()
    failed = preload()
    log(f"imported in {time.time() - start:.1f} s" + (f"; failed: {failed}" if failed else ""))
    threads = _threads()
    if threads != 1:  # a fork would copy locks held by threads the child lacks
        log(f"{threads} threads after the imports: not serving (jobs start cold)")
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *a: None)  # a child's end wakes the loop through wake_w
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "accept")
    sel.register(wake_r, selectors.EVENT_READ, "child")
    jobs: dict[int, socket.socket] = {}  # child pid -> its client's connection
    last = time.monotonic()  # of the last job's start or end
    while jobs or time.monotonic() < last + idle_s:
        # never blocks long: a missed wake-up costs a second, not a client waiting forever
        events = sel.select(timeout=min(1.0, max(0.0, last + idle_s - time.monotonic())) if not jobs else 1.0)
        for key, _ in events:
            if key.data == "accept":
                conn, _ = listener.accept()
                pid = _fork_job(conn, listener, wake_r, wake_w, jobs)
                if pid:
                    jobs[pid] = conn
                    sel.register(conn, selectors.EVENT_READ, pid)
            elif key.data == "child":
                try:
                    while os.read(wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
            elif not key.fileobj.recv(64):  # a client's connection: readable only once the client is gone
                sel.unregister(key.fileobj)
                try:
                    os.kill(key.data, signal.SIGTERM)  # its exit is reaped below like any other
                except ProcessLookupError:
                    pass
        ended = list(_reaped())
        for pid, status in ended:
            conn = jobs.pop(pid, None)
            if conn is not None:
                with contextlib.suppress(KeyError):  # unregistered already if its client is gone
                    sel.unregister(conn)
                _send(conn, status)
                conn.close()
        if events or ended:
            last = time.monotonic()
    log("idle: exiting")


def _reaped():
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        ended = f"signal {sig}" if sig else f"exit {os.WEXITSTATUS(status)}"
        log(f"job {pid}: {ended}, cpu {usage.ru_utime:.1f} s user + {usage.ru_stime:.1f} s system, "
            f"{usage.ru_minflt} page faults")
        yield pid, ended


def _send(conn: socket.socket, line: str) -> None:
    try:
        conn.sendall(f"{line}\n".encode())
    except OSError:
        pass


def _fork_job(conn: socket.socket, listener, wake_r: int, wake_w: int, jobs: dict) -> int | None:
    """Receive a job from ``conn`` and fork its child; the child never returns."""
    uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]
    if uid != os.getuid():
        log(f"refused a job of uid {uid}")
        conn.close()
        return None
    try:
        conn.settimeout(10)
        request, fds = _receive(conn)
        conn.settimeout(None)
    except (OSError, ValueError) as e:
        log(f"bad request: {e}")
        conn.close()
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    server = os.getpid()
    pid = os.fork()
    if pid:
        for fd in fds:
            os.close(fd)
        log(f"job {pid}: {' '.join(request['argv'])[-80:]}")
        _send(conn, f"pid {pid}")
        return pid
    try:  # the child: becomes the job
        signal.set_wakeup_fd(-1)
        for s in (listener, *jobs.values(), conn):
            s.close()
        os.close(wake_r)
        os.close(wake_w)
        _become_job(request, fds, server)
    finally:
        os._exit(1)  # _become_job exits itself; this is for a failure in the lines above


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    msg, anc, _, _ = conn.recvmsg(1 << 20, socket.CMSG_SPACE(3 * array.array("i").itemsize))
    fds = array.array("i")
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    if len(msg) < 4:
        raise ValueError("short request")
    size = struct.unpack("!I", msg[:4])[0]
    body = msg[4:]
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise ValueError("truncated request")
        body += chunk
    if len(fds) != 3:
        raise ValueError(f"expected 3 descriptors, got {len(fds)}")
    return json.loads(body), list(fds)


def _become_job(request: dict, fds: list[int], server: int) -> None:
    """In the forked child: take the client's descriptors, directory, environment and arguments,
    run its script as ``__main__`` and exit with its status."""
    global _in_child
    import runpy
    import traceback

    _in_child = True
    _die_with_server(server)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the server ignores it; a job must not
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for target, fd in zip((0, 1, 2), fds):
        os.dup2(fd, target)
        os.close(fd)
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(line_buffering=stream is sys.stderr or os.isatty(stream.fileno()))
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = list(request["argv"])
    sys.path[:] = list(request["path"])
    _fresh_random_state()
    code = 0
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, (int, type(None))):
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - printed as the interpreter would, then exit 1
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _die_with_server(server: int) -> None:
    """A job whose server dies is terminated too: its client has already reported it failed, and a
    job going on would write outputs Snakemake has given up on (``PR_SET_PDEATHSIG``)."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != server:  # the server died before the line above
        os._exit(1)


def _fresh_random_state() -> None:
    """Seed the generators from the OS, as a fresh interpreter does: each job its own draws, not
    copies of the server's (a job that wants reproducible draws seeds them itself, as ours do)."""
    import random

    random.seed()
    for mod, reseed in (("numpy", lambda np: np.random.seed()), ("torch", lambda torch: torch.seed())):
        if mod in sys.modules:
            reseed(sys.modules[mod])


def log(msg: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} gna.warm_start {msg}", file=sys.stderr, flush=True)


def main(argv: list[str]) -> None:
    if len(argv) == 3 and argv[1] == "serve":
        serve("\0" + argv[2])
    else:
        sys.exit("usage: python -m gna.warm_start serve NAME")


if __name__ == "__main__":  # run as gna.warm_start, not __main__: the jobs' hand_over() must see _in_child
    from gna import warm_start

    warm_start.main(sys.argv)
