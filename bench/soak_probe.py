"""What the soak reads of a worker process: its RSS, where that RSS lives and its open file descriptors (``/proc``), and
its ``/metrics``."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["MEMORY_PARTS", "memory_split", "open_fds", "rss_mb", "scrape"]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


MEMORY_PARTS = ("brk_mb", "anon_mb", "file_mb")


def memory_split(pid: int) -> dict[str, float]:
    """The process's resident memory by where it lives (``/proc/<pid>/smaps``), in MB: ``brk_mb`` the main heap,
    which glibc grows with brk (the main thread's allocations, Python's included when pymalloc hands them on);
    ``anon_mb`` the anonymous mappings (pymalloc's arenas of Python objects, glibc's per-thread arenas, large
    allocations, thread stacks; the kernel merges adjacent ones, so their sizes do not tell them apart);
    ``file_mb`` the file-backed mappings (the interpreter's and the libraries' code and data). Set beside the
    traced Python heap, growth in ``brk_mb`` or ``anon_mb`` that the heap does not show is memory the allocators
    hold, not objects kept."""
    kb = dict.fromkeys(MEMORY_PARTS, 0)
    part = ""
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split(maxsplit=5)
        if ":" not in head[0]:  # a mapping's header: range perms offset dev inode [path]
            name = head[5].strip() if len(head) > 5 else ""
            part = ("brk_mb" if name == "[heap]" else "file_mb" if name.startswith("/")
                    else "anon_mb" if name == "" or name.startswith("[anon") else "")
        elif head[0] == "Rss:" and part:
            kb[part] += int(head[1])
    return {name: round(value / 1024, 1) for name, value in kb.items()}


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def scrape(port: int, timeout: float = 5.0) -> dict[str, float]:
    """A worker's /metrics, summed per series name (and per ``map`` label for ``om_held_entries``)."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
    try:
        writer.write(b"GET /metrics HTTP/1.0\r\n\r\n")
        await writer.drain()
        response = await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(response.partition(b"\r\n\r\n")[2].decode()):
        for sample in family.samples:
            name = sample.name
            if name == "om_held_entries":
                name = f"held:{sample.labels['map']}"
            elif name == "om_consumer_group_lag_records" and ".model_requests" in sample.labels.get("topic", ""):
                continue  # the models' own group: its lag is the calls waiting, not inputs
            found[name] = found.get(name, 0.0) + sample.value
    return found
