"""Implementations of the ports: litellm gateway, offline model, stores, recall index, embedders, token counter."""
