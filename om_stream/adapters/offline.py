"""Make tiktoken and litellm work with no internet, without the user exporting anything.

* tiktoken downloads its BPE files from a public blob store on first use. litellm (a required dependency) bundles
  o200k_base, cl100k_base and p50k_base under the names tiktoken's cache expects (sha1 of the URL), so encodings
  are built from those files, pointing tiktoken's cache at them only for the duration of the load.
* ``import litellm`` fetches the model price map from GitHub and starts a retry thread unless
  ``LITELLM_LOCAL_MODEL_COST_MAP`` is set; :func:`import_litellm` sets it (unless the user chose otherwise) just
  before the first import, so costs come from the price map shipped with litellm.

Nothing happens at import time of this module.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tiktoken

__all__ = ["BUNDLED_ENCODINGS", "bundled_tokenizer_dir", "encoding", "import_litellm"]

BUNDLED_ENCODINGS = ("o200k_base", "cl100k_base", "p50k_base")
_env_lock = threading.Lock()


def bundled_tokenizer_dir() -> Path:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("litellm is not installed; it carries the offline tiktoken encodings")
    return Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"


@contextlib.contextmanager
def _tiktoken_cache(directory: Path) -> Iterator[None]:
    with _env_lock:
        previous = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(directory)
        try:
            yield
        finally:
            if previous is None:
                os.environ.pop("TIKTOKEN_CACHE_DIR", None)
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = previous


@functools.cache
def encoding(name: str = "o200k_base") -> tiktoken.Encoding:
    """A tiktoken encoding loaded from the bundled files (no network)."""
    import tiktoken
    from tiktoken_ext import openai_public

    if name not in BUNDLED_ENCODINGS:
        raise ValueError(f"encoding {name!r} is not bundled; choose one of {', '.join(BUNDLED_ENCODINGS)}")
    constructor = getattr(openai_public, name)
    with _tiktoken_cache(bundled_tokenizer_dir()):
        params = constructor()
    return tiktoken.Encoding(**params)


@functools.cache
def import_litellm() -> ModuleType:
    """Import litellm with its bundled price map and without its debug banners."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    return litellm
