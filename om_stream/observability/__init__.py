"""Metrics on an injected registry, logging setup and cost hooks."""
