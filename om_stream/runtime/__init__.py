"""Drives the core: the Faust app (Kafka sidecar) and the embedded in-process runner. Holds no OM rules."""
