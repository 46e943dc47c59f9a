"""The soak's curves in one image (``bench/soak.py`` writes it next to its CSV): per worker RSS, open file
descriptors, asyncio tasks, state-table records and content-cache bytes; the sentinel worker's in-process maps; the
group's lag; the agents' publish→context p50/p99 and the rate. Kills, graceful leaves and the Cassandra restart are
drawn as vertical lines.

matplotlib is the ``bench`` extra of pyproject.toml, used by no part of the product. Drawn again from a run's files:
``python bench/soak_plot.py docs/soak-60min`` (reads ``.csv`` and ``.json``, writes ``.png``).
"""

from __future__ import annotations

import csv
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

WORKERS = ("w0", "w1", "w2")
_EVENT_STYLE = {"SIGKILL": ("tab:red", ":"), "graceful": ("tab:orange", ":"), "Cassandra stops": ("black", "--")}


def _series(rows: list[dict[str, Any]], key: str, scale: float = 1.0) -> tuple[list[float], list[float | None]]:
    return [row["t_s"] / 60 for row in rows], [None if row.get(key) is None else float(row[key]) * scale
                                              for row in rows]


def plot_samples(rows: list[dict[str, Any]], events: list[tuple[float, str]], path: Path, *, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels: list[tuple[str, list[tuple[str, str, float]]]] = [
        ("RSS (MB); w0's brk heap and anonymous mappings", [(w, f"{w}_rss_mb", 1.0) for w in WORKERS]
         + [("w0 brk", "w0_brk_mb", 1.0), ("w0 anon", "w0_anon_mb", 1.0)]),
        ("open file descriptors", [(w, f"{w}_fds", 1.0) for w in WORKERS]),
        ("asyncio tasks", [(w, f"{w}_tasks", 1.0) for w in WORKERS]),
        ("state table: thousands of records, and MB", [(f"{w} records", f"{w}_table_records", 0.001) for w in WORKERS]
         + [(f"{w} MB", f"{w}_table_mb", 1.0) for w in WORKERS]),
        ("content cache (MB)", [(w, f"{w}_cache_mb", 1.0) for w in WORKERS]),
        ("w0 in-process maps (entries)", [(name, f"w0_{name}", 1.0) for name in
                                          ("decoded_states", "recent_contexts", "content_cache", "timers",
                                           "timer_heap", "model_calls", "settled_waiters")]),
        ("group lag (records); agents' rate (msgs/s, right)", [("lag", "lag", 1.0)]),
        ("publish→context (s)", [("p50", "p50_ms", 0.001), ("p99", "p99_ms", 0.001)]),
    ]
    figure, axes = plt.subplots(4, 2, figsize=(14, 14), sharex=True)
    for axis, (label, lines) in zip(axes.flat, panels, strict=True):
        for name, key, scale in lines:
            x, y = _series(rows, key, scale)
            axis.plot(x, y, label=name, linewidth=1.2)
        for at, what in events:
            for prefix, (colour, style) in _EVENT_STYLE.items():
                if what.startswith(prefix):
                    axis.axvline(at / 60, color=colour, linestyle=style, linewidth=0.7, alpha=0.6)
        axis.set_title(label, fontsize=10)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7, loc="upper left")
        if label.startswith("publish"):
            axis.set_yscale("log")
        if label.startswith("group lag"):
            rate = axis.twinx()
            x, y = _series(rows, "rate")
            rate.plot(x, y, label="rate", color="tab:green", linewidth=1.0)
            rate.set_ylim(bottom=0)
            rate.legend(fontsize=7, loc="upper right")
    for axis in axes[-1]:
        axis.set_xlabel("minutes")
    # a title naming several settings of w0 is wider than the figure: wrapped, not cut at both edges
    heading = textwrap.fill(f"om-stream soak: {title}", width=150)
    figure.suptitle(f"{heading}\nred: SIGKILL, orange: graceful leave, black: Cassandra restart", fontsize=11)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def _number(text: str) -> float | None:
    return None if text == "" else float(text)


def main(stem: str) -> None:
    """Draw ``<stem>.png`` again from ``<stem>.csv`` and ``<stem>.json`` (what ``bench/soak.py`` wrote)."""
    base = Path(stem)
    with base.with_suffix(".csv").open() as source:
        rows: list[dict[str, Any]] = [{key: _number(value) for key, value in row.items()}
                                      for row in csv.DictReader(source)]
    saved = json.loads(base.with_suffix(".json").read_text())
    events = [(event["t_s"], event["what"]) for event in saved["events"]]
    plot_samples(rows, events, base.with_suffix(".png"), title=saved["title"])


if __name__ == "__main__":
    main(sys.argv[1])
