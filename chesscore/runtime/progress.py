"""Progress bars: tqdm on stderr with throughput, imported only when a bar is shown.

    with progress_bar(True, total=n, unit="game", desc="convert") as bar:
        bar.update(k); bar.set_postfix(games="1,000", refresh=False)

Every long loop of the project (stages, training, self-play, the sample generator) shows its
progress through this one helper. Disabled (`--no-progress`, scripts, benchmarks) the bar does
nothing and tqdm is not imported.
"""

from __future__ import annotations

import sys
from typing import Any


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        pass

    def set_postfix_str(self, *args: Any, **kwargs: Any) -> None:
        pass

    def write(self, text: str) -> None:
        print(text, file=sys.stderr)

    def close(self) -> None:
        pass

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def progress_bar(enabled: bool = True, **kwargs: Any):
    """A tqdm bar on stderr (refreshed at most once a second) when enabled, else one that does
    nothing; both are context managers."""
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    kwargs.setdefault("mininterval", 1.0)
    return tqdm(file=sys.stderr, **kwargs)


def write(text: str) -> None:
    """A line on stderr that does not break a bar being drawn there."""
    if "tqdm" in sys.modules:
        from tqdm import tqdm

        tqdm.write(text, file=sys.stderr)
    else:
        print(text, file=sys.stderr, flush=True)
