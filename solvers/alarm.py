"""Wall-clock time limits for native solvers that hold the GIL (toulbar2): a signal sent to the process after a delay.

No Python thread runs while a native call holds the GIL, and ``signal.setitimer(ITIMER_REAL)`` sends SIGALRM, which
the experiment runner uses for its own trial timeouts. So ``Alarm`` arms a POSIX timer on ``CLOCK_MONOTONIC`` (Linux,
through ctypes) that sends SIGVTALRM, the signal toulbar2's own handler stops its search on, to the calling thread
(toulbar2's interrupt flag is per thread: sent to the process, the signal may land in another thread and stop
nothing); where there is no ``timer_create``, it falls back to ``ITIMER_VIRTUAL``, which counts the process's CPU time
rather than wall-clock time (the two agree on an idle machine; on a loaded one CPU time runs slower) and is not aimed
at a thread.

``keeping_sigint(install)`` runs ``install`` (which may take SIGINT over, as toulbar2's ``timer`` does) and gives SIGINT
its previous handler back, so Ctrl-C still raises ``KeyboardInterrupt`` (once the native call returns).
"""

from __future__ import annotations

import ctypes
import signal
import threading
from collections.abc import Callable
from types import TracebackType

CLOCK_MONOTONIC = 1
SIGEV_THREAD_ID = 4
"""Linux: deliver the timer's signal to one thread (toulbar2's interrupt flag is per thread, like its options)."""
SIGACTION_BYTES = 512
"""Room for a ``struct sigaction`` (152 bytes with glibc on x86-64), copied as opaque bytes."""


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class _Sigevent(ctypes.Structure):  # Linux: value (8 bytes), signal, notify kind, thread id, padding to 64 bytes
    _fields_ = [("sigev_value", ctypes.c_void_p), ("sigev_signo", ctypes.c_int), ("sigev_notify", ctypes.c_int),
                ("sigev_tid", ctypes.c_int), ("_pad", ctypes.c_int * 11)]


def _libc() -> ctypes.CDLL | None:
    """The C library with ``timer_create`` (in librt before glibc 2.34), or None."""
    for name in (None, "librt.so.1"):
        try:
            lib = ctypes.CDLL(name, use_errno=True)
        except OSError:
            continue
        if hasattr(lib, "timer_create"):
            return lib
    return None


class Alarm:
    """SIGVTALRM to the calling thread ``seconds`` of wall-clock time after entering the block (see the module
    docstring); ``fired`` tells afterwards whether it went off.

    Examples
    --------
    >>> import signal, time
    >>> previous = signal.signal(signal.SIGVTALRM, lambda *_: None)
    >>> with Alarm(0.01) as alarm:
    ...     time.sleep(0.05)
    >>> alarm.fired
    True
    >>> with Alarm(10) as alarm:
    ...     pass
    >>> alarm.fired
    False
    >>> _ = signal.signal(signal.SIGVTALRM, previous)
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = max(float(seconds), 1e-6)
        self.fired = False
        self._libc = _libc()
        self._timer = ctypes.c_void_p()

    def __enter__(self) -> Alarm:
        if self._libc is None:
            signal.setitimer(signal.ITIMER_VIRTUAL, self.seconds)
            return self
        event = _Sigevent(sigev_signo=signal.SIGVTALRM, sigev_notify=SIGEV_THREAD_ID,
                          sigev_tid=threading.get_native_id())
        if self._libc.timer_create(CLOCK_MONOTONIC, ctypes.byref(event), ctypes.byref(self._timer)) != 0:
            raise OSError(ctypes.get_errno(), "timer_create failed")
        whole = int(self.seconds)
        spec = _Itimerspec(it_value=_Timespec(whole, int((self.seconds - whole) * 1e9)))
        if self._libc.timer_settime(self._timer, 0, ctypes.byref(spec), None) != 0:
            self._libc.timer_delete(self._timer)
            raise OSError(ctypes.get_errno(), "timer_settime failed")
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._libc is None:
            self.fired = signal.setitimer(signal.ITIMER_VIRTUAL, 0)[0] == 0
            return
        left = _Itimerspec()
        self._libc.timer_gettime(self._timer, ctypes.byref(left))
        self.fired = left.it_value.tv_sec == 0 and left.it_value.tv_nsec == 0
        self._libc.timer_delete(self._timer)


def keeping_sigint(install: Callable[[], None]) -> None:
    """Run ``install`` and restore SIGINT's handler as it was before (POSIX ``sigaction``, from any thread)."""
    sigaction = ctypes.CDLL(None, use_errno=True).sigaction
    saved = ctypes.create_string_buffer(SIGACTION_BYTES)
    sigaction(signal.SIGINT, None, saved)
    install()
    sigaction(signal.SIGINT, saved, None)
