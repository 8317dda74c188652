"""Plain-text progress of a slide collection, shared by ``tumorboard tile`` and the embedding paths.

:class:`CountProgress` is its sibling for jobs that count records (``tumorboard import``).

One printer for every loop over slides (the local embedding engine, its Ray executor and the
``tile`` command), so they report alike: one line per finished slide,
``[k/N] name: status[, P patches, S s][: detail]``, and a live line for the slide in progress:
``[k/N] name: done/total patches | P patches so far | R patches/s``. A heartbeat thread
prints the live line at least every ``interval`` seconds (2 by default) while a slide is in
progress, so a long forward pass or a long segmentation never leaves the screen silent. On a
terminal the live line is rewritten in place (and refreshed up to five times a second); on a
stream that is not a terminal (a log file) each live update is a plain line, at most one every
``interval`` seconds.
No tqdm.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Protocol, TextIO

__all__ = ["CountProgress", "FinishedSlide", "SlideProgress"]

_CLEAR = "\r\033[K"
_BAR_WIDTH = 30


class FinishedSlide(Protocol):
    """What a finished-slide line shows (``tumorboard.embed.SlideResult`` is one).

    Attributes
    ----------
    name : str
        The slide's output name.
    status : str
        ``"done"``, ``"skipped"`` (already complete), ``"no tissue"`` or ``"failed"``.
    n_patches : int or None
        Its patches (shown for ``"done"``).
    seconds : float or None
        The time it took (shown for ``"done"``).
    error : str or None
        Why it failed or found no tissue (shown when set).
    """

    @property
    def name(self) -> str:
        """The slide's output name."""
        ...

    @property
    def status(self) -> str:
        """``"done"``, ``"skipped"``, ``"no tissue"`` or ``"failed"``."""
        ...

    @property
    def n_patches(self) -> int | None:
        """The slide's patches (shown for ``"done"``)."""
        ...

    @property
    def seconds(self) -> float | None:
        """The time it took (shown for ``"done"``)."""
        ...

    @property
    def error(self) -> str | None:
        """Why it failed or found no tissue (shown when set)."""
        ...


class SlideProgress:
    """Progress of a collection of slides on a text stream.

    Parameters
    ----------
    total : int
        The number of slides in the collection (finished lines count ``k/total``).
    stream : TextIO, optional
        Where to print; standard error when None.
    enabled : bool, default True
        Print anything at all (False: every method only keeps the counts).
    interval : float, default 2.0
        The longest silence, in seconds, while a slide is in progress: the heartbeat prints the
        live line when nothing was printed for that long; also the throttle of live lines off a
        terminal.

    Attributes
    ----------
    done : int
        Slides finished so far (done, skipped, no tissue or failed).
    patches : int
        Patches counted with :meth:`add_patches`, for the rate on the live line.
    """

    def __init__(
        self,
        total: int,
        *,
        stream: TextIO | None = None,
        enabled: bool = True,
        interval: float = 2.0,
    ) -> None:
        self.total = int(total)
        self.stream = sys.stderr if stream is None else stream
        self.enabled = bool(enabled)
        self.interval = float(interval)
        isatty = getattr(self.stream, "isatty", None)
        self.tty = self.enabled and callable(isatty) and bool(isatty())
        self.done = 0
        self.patches = 0
        self._t0 = time.perf_counter()
        self._last = float("-inf")
        self._live_shown = False
        self._lock = threading.RLock()
        self._current: tuple[str, int | None, int | None] | None = None
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def _write(self, text: str) -> None:
        """Write ``text`` to the stream and flush it."""
        with self._lock:
            self.stream.write(text)
            self.stream.flush()

    def _line(self, text: str) -> None:
        """Print one permanent line (above the live line on a terminal)."""
        with self._lock:
            if self.tty:
                self._write(_CLEAR + text + "\n")
                self._live_shown = False
            else:
                self._write(text + "\n")
            self._last = time.perf_counter()

    def _live(self, text: str) -> None:
        """Show ``text`` as the live line (terminal) or as a plain line (elsewhere)."""
        with self._lock:
            if self.tty:
                self._write(_CLEAR + text[:160])
                self._live_shown = True
            else:
                self._write(text + "\n")
            self._last = time.perf_counter()

    def _live_text(self) -> str:
        name, done, total = self._current or ("", None, None)
        now = time.perf_counter()
        rate = self.patches / max(now - self._t0, 1e-9)
        where = f"{done}/{total} patches" if total is not None else "working"
        return (
            f"[{self.done + 1}/{self.total}] {name}: {where} | "
            f"{self.patches} patches so far | {rate:.1f} patches/s"
        )

    def _heartbeat(self) -> None:
        tick = min(0.25, self.interval / 4)
        while not self._stop.wait(tick):
            with self._lock:
                if self._current is not None and time.perf_counter() - self._last >= self.interval:
                    self._live(self._live_text())

    def _start_heartbeat(self) -> None:
        if self.enabled and self._beat is None and self.interval > 0:
            self._beat = threading.Thread(target=self._heartbeat, name="tb-progress", daemon=True)
            self._beat.start()

    def add_patches(self, n: int) -> None:
        """Count ``n`` more patches processed (for the rate of the live line).

        Parameters
        ----------
        n : int
            Patches just processed.
        """
        with self._lock:
            self.patches += int(n)

    def start(self, name: str, total: int | None = None) -> None:
        """Mark a slide as in progress and show it now.

        Parameters
        ----------
        name : str
            The slide's output name.
        total : int or None, default None
            Its patches in all, when known.
        """
        self.update(name, 0 if total is not None else None, total, force=True)

    def update(
        self, name: str, done: int | None, total: int | None, *, force: bool = False
    ) -> None:
        """Record the progress of the slide in progress and show it (throttled unless ``force``).

        Parameters
        ----------
        name : str
            The slide's output name.
        done : int or None
            Its patches processed so far (None: not counted yet).
        total : int or None
            Its patches in all (None: not known yet).
        force : bool, default False
            Print now, whatever the time since the last line (else at most every ``interval``
            seconds off a terminal, every 0.2 s on one).
        """
        with self._lock:
            self._current = (name, done, total)
            if not self.enabled:
                return
            self._start_heartbeat()
            now = time.perf_counter()
            if not force and now - self._last < (0.2 if self.tty else self.interval):
                return
            self._live(self._live_text())

    def finished(self, slide: FinishedSlide) -> None:
        """Print the line of one finished slide and count it.

        Parameters
        ----------
        slide : FinishedSlide
            The slide's outcome: ``[k/N] name: status[, P patches, S s][: detail]``.
        """
        with self._lock:
            self.done += 1
            self._current = None
            if not self.enabled:
                return
            detail = slide.status
            if slide.status == "done" and slide.n_patches is not None:
                detail += f", {slide.n_patches} patches"
                if slide.seconds is not None:
                    detail += f", {slide.seconds:.1f} s"
            if slide.error:
                detail += f": {slide.error}"
            self._line(f"[{self.done}/{self.total}] {slide.name}: {detail}")
            if self.tty:
                filled = round(_BAR_WIDTH * self.done / max(self.total, 1))
                bar = "#" * filled + "-" * (_BAR_WIDTH - filled)
                self._live(f"[{bar}] {self.done}/{self.total}")

    def message(self, text: str) -> None:
        """Print a free-form line (e.g. a retry notice).

        Parameters
        ----------
        text : str
            The line, without its newline.
        """
        if self.enabled:
            self._line(text)

    def close(self) -> None:
        """Stop the heartbeat and end the live line on a terminal, so what follows starts fresh."""
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=5)
            self._beat = None
        with self._lock:
            self._current = None
            if self.tty and self._live_shown:
                self._write("\n")
                self._live_shown = False


class CountProgress:
    """Progress of a job that counts records (lines, logs) over files, on a text stream.

    Nothing is printed for the first ``after`` seconds (small jobs stay quiet), nor before the
    first :meth:`update` (a job that fails at its start prints only its error); then a line
    ``label: N what (f/F of), R what/s`` every ``every`` seconds (rewritten in place on a
    terminal, one plain line each time elsewhere) and a last one at :meth:`close`. Used as a
    context manager (or after :meth:`start`), a background thread prints the lines, so they
    keep coming while one long step (a large file's parse, the final write) runs between two
    :meth:`update` calls.

    Parameters
    ----------
    label : str
        What runs, e.g. ``"import"``.
    what : str, default "lines"
        What is counted.
    stream : TextIO, optional
        Where to print; standard error when None.
    every : float, default 2.0
        Seconds between two lines.
    after : float, default 2.0
        Seconds before the first line.
    enabled : bool, default True
        Print anything at all.
    of : str, default "files"
        What the (f/F ...) part of a line counts.
    """

    def __init__(
        self,
        label: str,
        *,
        what: str = "lines",
        of: str = "files",
        stream: TextIO | None = None,
        every: float = 2.0,
        after: float = 2.0,
        enabled: bool = True,
    ) -> None:
        self.label = label
        self.what = what
        self.of = of
        self.stream = sys.stderr if stream is None else stream
        self.every = float(every)
        self.after = float(after)
        self.enabled = bool(enabled)
        isatty = getattr(self.stream, "isatty", None)
        self.tty = self.enabled and callable(isatty) and bool(isatty())
        self._t0 = time.perf_counter()
        self._last = float("-inf")
        self._shown = False
        self._state = (0, 0, 0)
        self._updated = False  # no line before the job has reported anything
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> CountProgress:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the background thread that prints a line every ``every`` seconds."""
        if not self.enabled or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="tumorboard-progress", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        """Print due lines until :meth:`close`."""
        while not self._stop.wait(min(0.25, self.every)):
            self._maybe_show()

    def _text(self, now: float) -> str:
        """Return the progress line for the current counts."""
        files, total, count = self._state
        rate = count / max(now - self._t0, 1e-9)
        where = f" ({files}/{total} {self.of})" if total > 1 else ""
        return f"{self.label}: {count:,} {self.what}{where}, {rate:,.0f} {self.what}/s"

    def update(self, files: int, total: int, count: int) -> None:
        """Record the counts so far and print them when a line is due.

        Parameters
        ----------
        files : int
            Files finished.
        total : int
            Files in all.
        count : int
            Records counted so far.
        """
        self._state = (int(files), int(total), int(count))
        self._updated = True
        self._maybe_show()

    def _maybe_show(self) -> None:
        """Print the current counts when the first-line delay and the interval have passed."""
        if not self.enabled:
            return
        with self._lock:
            now = time.perf_counter()
            if not self._updated:  # a job that fails before its first count stays quiet
                return
            if now - self._t0 < self.after or now - self._last < self.every:
                return
            self._last = now
            self._show(self._text(now))

    def _show(self, text: str) -> None:
        """Print ``text`` as the live line (terminal) or as a plain line."""
        self.stream.write((_CLEAR + text) if self.tty else text + "\n")
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        """Stop the thread; print the final counts (when any line was shown), end the line."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if not (self.enabled and self._shown):
            return
        with self._lock:
            self._show(self._text(time.perf_counter()))
            if self.tty:
                self.stream.write("\n")
                self.stream.flush()
