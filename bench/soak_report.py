"""What ``bench/soak.py`` makes of a finished run: the slopes of its curves, its figures, the printed report and the
files written side by side (the samples as CSV, the figures, slopes and events as JSON, the plot as PNG)."""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path
from typing import Any

import soak_judge as judge
from soak_plot import plot_samples
from soak_probe import MEMORY_PARTS

# the in-process maps a worker reports (om_held_entries{map}), and the per-worker curves whose slope is judged
HELD = ("decoded_states", "recent_contexts", "content_cache", "timers", "timer_heap", "model_calls",
        "inflight_calls", "settled_waiters", "near_block_after")
SLOPED = ("rss_mb", *MEMORY_PARTS, "fds", "tasks", "table_records", "table_mb", "cache_mb", *HELD)


def slopes(rows: list[dict[str, Any]], duration: float) -> dict[str, float]:
    """Per hour, over the second half of the run: each sentinel (w0) curve, the lag and the p99."""
    half = [row for row in rows if row["t_s"] >= duration / 2]
    found = {}
    for key in [f"w0_{name}" for name in SLOPED] + ["lag", "p99_ms", "p50_ms"]:
        points = [(row["t_s"] / 3600, float(row[key])) for row in half if row.get(key) is not None]
        found[key] = judge.slope(points)
    return found


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    columns = list(dict.fromkeys(key for row in rows for key in row))
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, columns)
        writer.writeheader()
        writer.writerows(rows)


def summary(result: dict[str, Any], rows: list[dict[str, Any]], args: argparse.Namespace, capacity: float | None,
            rate: float, latencies: list[float]) -> dict[str, Any]:
    """The run's figures, in the order they are printed."""
    w0 = [row for row in rows if row.get("w0_rss_mb") is not None]
    return {"duration_s": round(args.duration), "threads": args.threads,
            "capacity_msgs_s": round(capacity, 1) if capacity is not None else "not measured (--rate given)",
            "rate_target_msgs_s": round(rate, 1),
            "rate_achieved_msgs_s": round(result["messages"] / max(1.0, args.duration), 1), **result,
            "p50_ms": round(judge.percentile(latencies, 0.5) * 1000),
            "p99_ms": round(judge.percentile(latencies, 0.99) * 1000),
            "p99_ms_worst_sample": round(max((r["p99_ms"] for r in rows if r["p99_ms"] is not None), default=0)),
            "w0_rss_mb_first_last": f"{w0[0]['w0_rss_mb']:.0f} -> {w0[-1]['w0_rss_mb']:.0f}" if w0 else "n/a"}


def report(figures: dict[str, Any], found: dict[str, float], events: list[tuple[float, str]]) -> None:
    print("\n== soak result ==")
    for key, value in figures.items():
        print(f"{key}: {value}")
    print("slopes per hour over the second half (w0 = the worker that lives through the run):")
    for key, value in found.items():
        print(f"  slope {key}: {value:+.2f}/h")
    print("events:")
    for at, what in events:
        print(f"  {at:7.0f}s {what.splitlines()[0]}")


def run_title(args: argparse.Namespace, rate: float) -> str:
    """The plot's and the JSON's title: the traffic, and what w0 runs with."""
    return (f"{args.threads} threads at {rate:.1f} msgs/s ({args.load:.0%} of one worker's capacity), "
            f"3 workers, {args.duration / 60:.0f} min" + ("; w0 under tracemalloc" if args.heap_every else "")
            + "".join(f"; w0 with {name}={value}" for name, value in args.sentinel_env.items()))


def write_outputs(out: Path, rows: list[dict[str, Any]], events: list[tuple[float, str]],
                  figures: dict[str, Any] | None, found: dict[str, float], title: str) -> None:
    """The samples (CSV), the figures, slopes and events (JSON) and the plot (PNG), side by side."""
    out.parent.mkdir(parents=True, exist_ok=True)
    if not rows:
        return
    write_csv(rows, out.with_suffix(".csv"))
    out.with_suffix(".json").write_text(json.dumps(
        {"title": title, "figures": figures, "slopes_per_hour": found,
         "events": [{"t_s": round(at, 1), "what": what.splitlines()[0]} for at, what in events]},
        indent=2) + "\n")
    plot_samples(rows, events, out.with_suffix(".png"), title=title)


