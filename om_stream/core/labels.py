"""How thread ids appear inside observation text and prompts (``obscureThreadIds``)."""

from __future__ import annotations

import hashlib

__all__ = ["thread_label"]


def thread_label(thread_id: str, obscure: bool) -> str:
    """The thread id itself, or a short stable hash so the model sees no pattern in real ids."""
    return hashlib.sha1(thread_id.encode()).hexdigest()[:8] if obscure else thread_id
