"""Test doubles shipped with om-stream for users' tests and ours: no network, no keys, deterministic."""
