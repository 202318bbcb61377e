"""Progress display: a tqdm bar on a terminal, a plain line every few seconds otherwise.

A log file should not fill with carriage-return frames, so when stderr is not a
terminal `bar` returns a small stand-in with the same surface (iteration, `update`,
`set_postfix`, `close`) that writes `desc: n/total unit (rate/s) postfix` lines.
"""

from __future__ import annotations

import sys
import time


def bar(
    iterable=None,
    total: int | None = None,
    desc: str = "",
    unit: str = "it",
    initial: int = 0,
    every: float = 10.0,
    logger=None,
    log_every: float = 5.0,
    **kw,
):
    """A progress display; with `logger` (a logging.Logger, e.g. one writing a build's
    log file), also a line through it every `log_every` seconds and at the end."""
    if sys.stderr.isatty():
        from tqdm import tqdm

        shown = tqdm(iterable, total=total, desc=desc, unit=unit, initial=initial, **kw)
    else:
        shown = Lines(iterable, total, desc, unit, initial, every)
    return Logged(shown, logger, log_every) if logger is not None else shown


class Logged:
    """A progress display that also writes `desc: n/total unit (rate/s)` to a logger every
    few seconds, so a log file shows how far a long job got while it runs."""

    def __init__(self, shown, logger, every: float) -> None:
        self.shown, self.logger, self.every = shown, logger, every
        self.start = self.last = time.monotonic()
        self.first = shown.n

    def __iter__(self):
        for item in self.shown.iterable:
            yield item
            self.update(1)
        self.close()

    def update(self, n: int = 1) -> None:
        self.shown.update(n)
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            self._log(now)

    def set_postfix(self, **values) -> None:
        self.shown.set_postfix(**values)

    def _log(self, now: float) -> None:
        n, total = self.shown.n, self.shown.total
        rate = (n - self.first) / max(now - self.start, 1e-9)
        self.logger.info(
            "%s: %d%s %s (%.2f %s/s)",
            getattr(self.shown, "desc", ""),
            n,
            f"/{total}" if total else "",
            getattr(self.shown, "unit", ""),
            rate,
            getattr(self.shown, "unit", ""),
        )

    def close(self) -> None:
        self._log(time.monotonic())
        self.shown.close()


def set_total(shown, total: int) -> None:
    """A display's total changed while it runs (a stage's steps fixed after its warm-up)."""
    shown = getattr(shown, "shown", shown)  # a Logged display's own
    shown.total = total
    if hasattr(shown, "refresh"):
        shown.refresh()


class Lines:
    def __init__(self, iterable, total, desc, unit, initial=0, every=10.0) -> None:
        self.iterable = iterable
        self.total = total if total is not None else (len(iterable) if hasattr(iterable, "__len__") else None)
        self.desc, self.unit, self.n, self.every = desc, unit, initial, every
        self.start = self.last = time.monotonic()
        self.postfix = ""
        self.closed = False

    def __iter__(self):
        for item in self.iterable:
            yield item
            self.update(1)
        self.close()

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if now - self.last >= self.every and not self.closed:
            self.last = now
            self._line(now)

    def set_postfix(self, **values) -> None:
        self.postfix = " ".join(f"{k}={v}" for k, v in values.items())

    def _line(self, now: float) -> None:
        of = f"/{self.total}" if self.total else ""
        rate = self.n / max(now - self.start, 1e-9)
        print(
            f"{self.desc}: {self.n}{of} {self.unit} ({rate:.2f} {self.unit}/s) {self.postfix}".rstrip(),
            file=sys.stderr,
            flush=True,
        )

    def close(self) -> None:
        """The final line, once."""
        if self.n and not self.closed:
            self._line(time.monotonic())
        self.closed = True


def quiet_libraries() -> None:
    """When stderr is not a terminal, switch off the progress bars of the libraries we
    use (datasets, transformers, the hub client; TQDM_DISABLE for the processes we start),
    so that logs hold lines, not carriage-return frames."""
    if sys.stderr.isatty():
        return
    import os

    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    for module, call in (
        ("datasets", "disable_progress_bars"),
        ("transformers.utils.logging", "disable_progress_bar"),
        ("huggingface_hub.utils", "disable_progress_bars"),
    ):
        if module.split(".")[0] in sys.modules:
            try:
                getattr(sys.modules[module] if module in sys.modules else __import__(module, fromlist=[call]), call)()
            except (ImportError, AttributeError):
                pass
