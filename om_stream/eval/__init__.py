"""Benchmarks of Observational Memory, for users with model keys (``om-stream eval ...``).

Each benchmark is an application on top of the public API, as ``om_stream.replay`` is: it feeds a dataset's
conversations to :class:`om_stream.Memory` on the conversations' own clock, asks a reader model with the context OM
publishes, and grades the answers. Nothing here holds an OM rule; the engine is measured exactly as agents use it.

    progress       a progress bar on stderr (no dependency)
    longmemeval/   LongMemEval (_S, _M, oracle): dataset, replay, reader, judge, journal, summary, harness
"""
