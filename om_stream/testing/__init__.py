"""Test doubles shipped with om-stream for users' tests and ours: no network, no keys, deterministic.

* :class:`FunctionModel`: a ``ChatModel`` answering from a Python function, in-process (no HTTP at all);
* :class:`FakeOpenAI`: an OpenAI-compatible server on loopback, for tests of how om-stream reaches a provider;
* :class:`NetworkGuard`: refuses every connection beyond loopback, so no test calls a real provider by accident.

None of them imports litellm, Kafka or a store driver.
"""

from om_stream.testing.fake_openai import ErrorReply, FailurePlan, FakeOpenAI, MalformedReply, RecordedRequest, Reply
from om_stream.testing.function_model import FunctionModel, ModelFunction
from om_stream.testing.network import NetworkGuard, RemoteNetworkBlocked

__all__ = [
    "ErrorReply",
    "FailurePlan",
    "FakeOpenAI",
    "FunctionModel",
    "MalformedReply",
    "ModelFunction",
    "NetworkGuard",
    "RecordedRequest",
    "RemoteNetworkBlocked",
    "Reply",
]
