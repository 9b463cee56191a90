"""A one-line progress bar for the tune CLI (the package depends on no
progress library): redrawn in place on a terminal, silent elsewhere but
for the last line."""

from __future__ import annotations

import shutil
import sys
import time


class ProgressBar:
    def __init__(self, stream=None, width: int = 24):
        self.stream = stream or sys.stderr
        self.width = width
        self.start = time.monotonic()
        self.live = self.stream.isatty()

    def __call__(self, done: int, total: int, label: str) -> None:
        if not self.live and done < total:
            return
        filled = self.width * done // max(total, 1)
        elapsed = time.monotonic() - self.start
        bar = "#" * filled + "." * (self.width - filled)
        line = f"[{bar}] {done}/{total} {elapsed:5.1f}s {label}"
        columns = shutil.get_terminal_size((100, 20)).columns
        end = "\n" if done >= total else ""
        self.stream.write("\r" + line[: columns - 1].ljust(columns - 1) + end)
        self.stream.flush()
