"""The world of the retention property tests (embedded memory on a SQLite file and a local Qdrant folder, the
clock moved by hand): the seeds, the options and the times they run with, messages carrying a marker whose
creation time the test knows, and where to look for the markers afterwards."""

from __future__ import annotations

import os
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SEEDS = range(int(os.environ.get("OM_RETENTION_SEEDS", "10")))
OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 220, "bufferTokens": 0.25},
                           "reflection": {"observationTokens": 500}, "retrieval": {"vector": True}}
T0 = int(datetime(2026, 4, 1, 8, 0, tzinfo=UTC).timestamp() * 1000)
MINUTE = 60_000
GAP = 600_000  # the purge gap of these runs (EngineLimits.purge_gap_ms)
WORDS = ("ferry", "invoice", "tide", "lighthouse", "budget", "hotel", "pastry", "island", "report", "train")


def markers_in(text: str) -> set[str]:
    return {word.strip(".,:;()\"'") for word in text.split() if "MK" in word and word.rstrip(".,:;()\"'").endswith("Q")}


def sqlite_bytes(folder: Path) -> bytes:
    """The SQLite file and its WAL, as bytes."""
    return b"".join(path.read_bytes() for path in sorted(folder.glob("om.db*")))


def message(mark: str, index: int, thread: str, at: int, rng: random.Random) -> dict[str, Any]:
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18)))
    return {"message_id": f"m{index}", "thread_id": thread, "resource_id": "r1",
            "role": "user" if index % 2 else "assistant", "created_at": datetime.fromtimestamp(at / 1000, UTC),
            "parts": [{"type": "text", "text": f"Remember {mark}: {words}"}]}
