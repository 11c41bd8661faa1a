"""The process supervisor: node command lines, node processes, and the signals that stop them.

One place for what ``lifelong-learning up --processes``, the demo and the tests all do with
nodes in their own processes (importing this module imports neither rclpy nor torch):

- :func:`node_command`: ``python -m lifelong_learning.nodes.<node> --ros-args --params-file F
  ... -p name:=value ...``;
- :class:`NodeProcess`: a child process in its own session (a terminal's Ctrl-C reaches only
  its supervisor, which sends exactly one SIGINT, so that a second one cannot interrupt a
  final checkpoint; a SIGKILL of the supervisor leaves it running), its output written to a
  log file or forwarded line by line with a ``[node]`` prefix; :meth:`NodeProcess.stop` sends
  SIGINT (Ctrl-C) and kills after a timeout; :func:`stop_all` does that for several at once;
- :class:`StopSignals`: SIGINT, SIGTERM and SIGHUP (unless ignored, as under ``nohup``) →
  one stop request (a :class:`threading.Event`); repeats while stopping are reported and
  otherwise ignored;
- :func:`middleware_environment`: the environment that gives ROS 2 processes this package's
  Fast DDS profile for large messages (``config/fastdds_large_messages.xml``), unless the user
  named a profiles file already. The one rule that ``scripts/env.sh``, ``up``, the demo and the
  launch files apply.

Children never import the source tree from their working directory: they run with
``PYTHONSAFEPATH=1`` (``python -m`` does not put the current directory on ``sys.path``), and
when they log to a file they run in that file's folder.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import IO, Any

#: the signals that always stop a supervisor or a node cleanly (SIGHUP too, unless ignored)
STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)

#: serializes the lines that processes forward to a shared stream
_OUTPUT_LOCK = threading.Lock()

#: the environment variable through which Fast DDS reads an XML profiles file
FASTDDS_PROFILES_VARIABLE = "FASTDDS_DEFAULT_PROFILES_FILE"

#: this package's Fast DDS profile for camera-sized messages, in its config/ folder
FASTDDS_PROFILE_NAME = "fastdds_large_messages.xml"


def fastdds_profile_path() -> Path | None:
    """The shipped ``config/fastdds_large_messages.xml``: the installed share directory's, else the
    source tree's (a checkout not rebuilt since the file was added); None if neither has it."""
    from lifelong_learning.nodes.catalog import config_dir

    source = Path(__file__).resolve().parents[2] / "config"
    for folder in (config_dir(), source):
        if folder is not None and (folder / FASTDDS_PROFILE_NAME).is_file():
            return folder / FASTDDS_PROFILE_NAME
    return None


def middleware_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables to add to ``environ`` (default: this process's) so that the ROS 2 processes
    started with it use this package's Fast DDS profile for large messages.

    ``{"FASTDDS_DEFAULT_PROFILES_FILE": <config>/fastdds_large_messages.xml}``, or ``{}`` when
    ``environ`` names a profiles file already (the user's choice is kept: a profile of theirs
    should add a large shared-memory segment itself) or the profile is not found. Other RMW
    implementations ignore the variable, so it is set whatever ``RMW_IMPLEMENTATION`` says.
    Fast DDS reads the file when a process creates its first participant: apply the result
    before ``rclpy.init`` in this process, or pass it to the children.
    """
    env = os.environ if environ is None else environ
    if env.get(FASTDDS_PROFILES_VARIABLE, ""):
        return {}
    path = fastdds_profile_path()
    return {FASTDDS_PROFILES_VARIABLE: str(path)} if path is not None else {}


def node_command(
    node: str,
    params_files: Iterable[str | os.PathLike[str]] = (),
    params: Iterable[str] = (),
    ros_args: Iterable[str] = (),
    python: str | None = None,
) -> list[str]:
    """The command line that runs node ``node`` in its own process.

    ``python -m lifelong_learning.nodes.<node> --ros-args``, then ``--params-file F`` for each
    of ``params_files`` in order (later files override earlier ones), ``-p P`` for each of
    ``params`` (``"name:=value"``), then ``ros_args`` as they are (remappings, more ``-p``).
    ``python`` defaults to this interpreter.
    """
    argv = [python or sys.executable, "-m", f"lifelong_learning.nodes.{node}", "--ros-args"]
    for path in params_files:
        argv += ["--params-file", os.fspath(path)]
    for param in params:
        argv += ["-p", param]
    return [*argv, *ros_args]


def stop_signals() -> list[signal.Signals]:
    """SIGINT, SIGTERM, and SIGHUP unless it is ignored (``nohup``)."""
    hup = getattr(signal, "SIGHUP", None)
    extra = [hup] if hup is not None and signal.getsignal(hup) is signal.SIG_DFL else []
    return [*STOP_SIGNALS, *extra]


class StopSignals:
    """Python-level handlers of :func:`stop_signals` that request a stop, once.

    The first signal sets :attr:`event` and records its name in :attr:`signal_name`; later
    ones (a terminal and ``ros2 launch`` both send SIGINT on Ctrl-C) are reported on stderr as
    ``[who] SIGINT ignored: already stopping (detail)`` and otherwise ignored. Setting
    :attr:`event` directly (the caller has begun to stop) makes later signals ignored too.
    """

    def __init__(self, who: str, detail: str = "") -> None:
        self.event = threading.Event()
        self.signal_name = ""
        self._who = who
        self._detail = f" ({detail})" if detail else ""
        self._previous: dict[int, Any] = {}

    def install(self) -> StopSignals:
        """Install the handlers (only the main thread can; elsewhere this does nothing); returns self."""
        if threading.current_thread() is threading.main_thread():
            for sig in stop_signals():
                self._previous[sig] = signal.signal(sig, self._on_signal)
        return self

    def restore(self) -> None:
        """Put back the handlers that :meth:`install` replaced."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.event.is_set():
            print(
                f"[{self._who}] {name} ignored: already stopping{self._detail}", file=sys.stderr, flush=True
            )
            return
        self.signal_name = name
        self.event.set()


class NodeProcess:
    """A command (typically :func:`node_command`) running in its own process and session.

    Output (stdout and stderr together) goes either to the file ``log_path`` or, when
    ``forward_to`` is given, line by line to that stream as ``[name] line`` (the last
    ``tail_lines`` lines are kept for :meth:`log`). The child's environment is this one with
    ``PYTHONUNBUFFERED=1`` and ``PYTHONSAFEPATH=1``, then ``env``; its working directory is
    ``cwd``, by default the folder of ``log_path`` (else this one's).
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        name: str | None = None,
        log_path: Path | None = None,
        forward_to: IO[str] | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        tail_lines: int = 1000,
    ) -> None:
        if (log_path is None) == (forward_to is None):
            raise ValueError("give exactly one of log_path and forward_to")
        self.argv = list(argv)
        self.name = name or Path(self.argv[0]).name
        self.log_path = log_path
        self.killed = False
        self._tail: deque[str] = deque(maxlen=tail_lines)
        self._log: IO[bytes] | None = open(log_path, "wb") if log_path is not None else None
        self.proc = subprocess.Popen(
            self.argv,
            stdout=self._log if self._log is not None else subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONSAFEPATH": "1", **(env or {})},
            cwd=cwd if cwd is not None else (log_path.parent if log_path is not None else None),
            start_new_session=True,
        )
        self._reader: threading.Thread | None = None
        if forward_to is not None:
            self._reader = threading.Thread(
                target=self._forward, args=(forward_to,), name=f"output-{self.name}", daemon=True
            )
            self._reader.start()

    def _forward(self, out: IO[str]) -> None:
        assert self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            self._tail.append(line)
            with _OUTPUT_LOCK:
                out.write(f"[{self.name}] {line}\n")
                out.flush()

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        """The exit status (negative: killed by that signal); None while running."""
        return self.proc.poll()

    def alive(self) -> bool:
        """True while the process runs."""
        return self.proc.poll() is None

    def log(self) -> str:
        """Everything the process printed so far (forwarded output: the last lines kept)."""
        if self.log_path is None:
            return "\n".join(self._tail)
        if self._log is not None and not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` if the process still runs."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait up to ``timeout`` seconds (None: for ever); the exit status, None if still running."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> int:
        """SIGKILL (marks the process :attr:`killed`) and wait; the exit status."""
        if self.proc.poll() is None:
            self.killed = True
            self.proc.kill()
        return self.proc.wait()

    def close(self) -> None:
        """Release the log file and the output thread (after the process has exited)."""
        if self._reader is not None and self._reader.is_alive():
            self._reader.join(5.0)
        if self._log is not None:
            self._log.close()

    def stop(self, sig: int = signal.SIGINT, timeout: float = 15.0) -> int:
        """Send ``sig`` (default SIGINT, as Ctrl-C) and wait; SIGKILL after ``timeout`` s. The exit status."""
        self.send_signal(sig)
        code = self.wait(timeout)
        if code is None:
            code = self.kill()
        self.close()
        return code


def stop_all(
    processes: Sequence[NodeProcess], sig: int = signal.SIGINT, timeout: float = 30.0
) -> list[NodeProcess]:
    """Send ``sig`` to every process at once, give them ``timeout`` s in all, then SIGKILL the rest.

    Returns the processes that had to be killed. Every process is closed afterwards.
    """
    for process in processes:
        process.send_signal(sig)
    deadline = time.monotonic() + timeout
    killed = []
    for process in processes:
        if process.wait(max(0.0, deadline - time.monotonic())) is None:
            process.kill()
            killed.append(process)
    for process in processes:
        process.close()
    return killed
