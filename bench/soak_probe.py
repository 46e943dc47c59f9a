"""What the soak reads of a worker process: its RSS and open file descriptors (``/proc``), and its ``/metrics``."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["open_fds", "rss_mb", "scrape"]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


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
