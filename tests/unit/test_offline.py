"""tiktoken and litellm work with the network absent, without the user exporting anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys

# Runs in a fresh interpreter with every non-loopback connection and DNS lookup refused, and with none of the
# offline environment variables set, so only what the package does itself can make it pass.
_PROBE = r"""
import json, socket
attempts = []
_real_connect = socket.socket.connect
def _guard_connect(self, address):
    host = address[0] if isinstance(address, tuple) else address
    if host not in ("127.0.0.1", "::1", "localhost"):
        attempts.append(str(host))
        raise OSError("network disabled by test")
    return _real_connect(self, address)
def _guard_getaddrinfo(host, *args, **kwargs):
    if host not in ("127.0.0.1", "::1", "localhost"):
        attempts.append(str(host))
        raise socket.gaierror("network disabled by test")
    return _real_getaddrinfo(host, *args, **kwargs)
_real_getaddrinfo = socket.getaddrinfo
socket.socket.connect = _guard_connect
socket.getaddrinfo = _guard_getaddrinfo

from om_stream.adapters.offline import encoding, import_litellm
enc = encoding("o200k_base")
cl = encoding("cl100k_base")
litellm = import_litellm()
cost = litellm.cost_per_token(model="openai/gpt-5-mini", prompt_tokens=1000, completion_tokens=500)
print(json.dumps({"o200k": enc.encode("hello world"), "cl100k": cl.encode("hello world"),
                  "cost": sum(cost), "attempts": attempts}))
"""


def test_tiktoken_and_litellm_work_without_network_or_env() -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("TIKTOKEN_CACHE_DIR", "LITELLM_LOCAL_MODEL_COST_MAP", "LITELLM_OFFLINE_MODE",
                        "DATA_GYM_CACHE_DIR")}
    env["HOME"] = os.environ.get("HOME", "/tmp")
    proc = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["o200k"] == [24912, 2375]
    assert result["cl100k"] == [15339, 1917]
    # gpt-5-mini: $0.25/M input, $2.00/M output in litellm's bundled price map
    assert abs(result["cost"] - (1000 * 0.25e-6 + 500 * 2.0e-6)) < 1e-12
    assert result["attempts"] == []


def test_the_probe_really_has_no_network() -> None:
    guard_then_fetch = _PROBE.split("from om_stream", maxsplit=1)[0] + (
        "import urllib.request\n"
        "try:\n    urllib.request.urlopen('https://openaipublic.blob.core.windows.net/', timeout=5)\n"
        "    print('reached')\nexcept OSError:\n    print('blocked', attempts)\n")
    proc = subprocess.run([sys.executable, "-c", guard_then_fetch], capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.stdout.startswith("blocked"), proc.stdout + proc.stderr
