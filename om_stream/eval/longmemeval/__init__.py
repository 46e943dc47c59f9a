"""LongMemEval through Observational Memory: ``om-stream eval longmemeval DATA.json``.

    dataset    the public format (LongMemEval_S, _M, oracle), validated and read one question at a time
    replay     a question's haystack through ``om_stream.Memory`` on its own dates, then the question
    reader     the model that answers with OM's context
    judge      the per-type grading rubric and the judge's verdict
    records    what is kept of each question
    journal    the results folder: resuming, the official evaluator's hypotheses file
    summary    accuracy (micro, macro, per type), tokens, cost and latency
    harness    the run: concurrency, progress, resume (``run_longmemeval``)

Importing the package loads none of them: the dataset reader, say, needs no ``Memory``.
"""
