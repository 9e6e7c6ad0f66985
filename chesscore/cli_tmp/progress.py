"""Progress bars for the stage CLIs: tqdm on stderr, imported only when a bar is shown.

    bar = progress_bar(enabled=not args.no_progress, total=n, unit="game", desc="convert")
    bar.update(k); bar.set_postfix(games="1,000", refresh=False); bar.close()

With --no-progress (as in scripts and benchmarks) the bar does nothing and tqdm is not imported.
"""

from __future__ import annotations

import sys
from typing import Any


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def set_postfix(self, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(enabled: bool, **kwargs: Any):
    """A tqdm bar (refreshed at most once a second) when enabled, else one that does nothing."""
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(mininterval=1.0, file=sys.stderr, **kwargs)
