"""Replaying conversation files through the embedded runner: ``om-stream replay``, ``om-stream demo``, benchmarks."""
