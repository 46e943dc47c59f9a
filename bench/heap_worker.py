"""The worker under ``tracemalloc``, for the soak's sentinel: where its Python heap grows over hours.

``python -m bench.heap_worker`` runs ``om_stream.runtime.worker`` as ``python -m`` would, with tracemalloc
started first (one frame per allocation: the cost stays a fraction of the worker's) and a daemon thread that, every
``OM_SOAK_HEAP_EVERY_S`` seconds, takes a snapshot and appends to ``OM_SOAK_HEAP_OUT`` the traced total and the
lines (file:line) whose live bytes grew most since the first snapshot. The first snapshot is the baseline, taken one
period after the start, once the worker has warmed up. Nothing of the product changes: only this process pays
for the tracing, and its RSS includes tracemalloc's own bookkeeping (about 50 bytes per live block).
"""

from __future__ import annotations

import os
import runpy
import threading
import time
import tracemalloc
from pathlib import Path

TOP = 25


def _interesting(snapshot: tracemalloc.Snapshot) -> tracemalloc.Snapshot:
    return snapshot.filter_traces((tracemalloc.Filter(False, tracemalloc.__file__),
                                   tracemalloc.Filter(False, "<frozen importlib._bootstrap>")))


def _watch(out: Path, every_s: float) -> None:
    started = time.monotonic()
    baseline: tracemalloc.Snapshot | None = None
    while True:
        time.sleep(every_s)
        snapshot = _interesting(tracemalloc.take_snapshot())
        traced, peak = tracemalloc.get_traced_memory()
        own = tracemalloc.get_tracemalloc_memory()
        lines = [f"== at {time.monotonic() - started:.0f} s: traced {traced / 2**20:.1f} MB "
                 f"(peak {peak / 2**20:.1f} MB), tracemalloc's own {own / 2**20:.1f} MB"]
        if baseline is None:
            baseline = snapshot
            lines.append("baseline; largest now:")
            lines += [f"  {stat}" for stat in snapshot.statistics("lineno")[:TOP]]
        else:
            lines.append("grown most since the baseline:")
            lines += [f"  {stat}" for stat in snapshot.compare_to(baseline, "lineno")[:TOP]]
            lines.append("by file:")
            lines += [f"  {stat}" for stat in snapshot.compare_to(baseline, "filename")[:TOP]]
        with out.open("a") as handle:
            handle.write("\n".join(lines) + "\n")


def main() -> None:
    tracemalloc.start(1)
    out = Path(os.environ["OM_SOAK_HEAP_OUT"])
    every_s = float(os.environ.get("OM_SOAK_HEAP_EVERY_S", "600"))
    threading.Thread(target=_watch, args=(out, every_s), name="heap-watch", daemon=True).start()
    runpy.run_module("om_stream.runtime.worker", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
