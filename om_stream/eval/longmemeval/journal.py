"""The results folder of a run, and how a run picks up where an interrupted one stopped.

    run.json           what the results were made with (dataset, models, OM options): a resumed run must match
    results.jsonl      the journal: one line per question answered, one more once it is judged (the last wins)
    hypotheses.jsonl   {"question_id", "hypothesis"} per line: the file LongMemEval's own evaluator reads
    summary.json       accuracy, tokens, cost and latency (``summary``)

The journal is the source of truth; the other files are rewritten from it at the end of every run. A line is
flushed to disk before the question counts as done, and a line torn by a crash mid-write is cut off when the
journal is opened again (that question is simply asked again).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from om_stream.errors import ConfigError, WireDecodeError
from om_stream.eval.longmemeval.records import QuestionResult

__all__ = ["Journal", "RunIdentity", "write_hypotheses", "write_json"]

log = logging.getLogger(__name__)


class RunIdentity(BaseModel):
    """What makes two runs' results comparable: a folder holds the results of one identity only."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    benchmark: str = "longmemeval"
    dataset: str  # the file's name: the same questions may be read from another folder
    om_model: str
    reader_model: str
    judge_model: str
    om_options: dict[str, Any]

    def check(self, folder: Path) -> None:
        """Record this identity in ``folder``, or refuse when the folder holds results of another one."""
        path = folder / "run.json"
        if path.exists():
            try:
                existing = RunIdentity.model_validate_json(path.read_text())
            except ValidationError as exc:
                raise ConfigError("--out", f"{path} is not a run description of this harness: "
                                           f"{exc.errors()[0]['msg']}") from None
            if existing != self:
                differ = [name for name in RunIdentity.model_fields
                          if getattr(existing, name) != getattr(self, name)]
                raise ConfigError("--out", f"{folder} holds results made with other {', '.join(differ)} "
                                           f"({path}); give another --out, or the same options to resume")
            return
        write_json(path, self.model_dump(mode="json"))


class Journal:
    """``results.jsonl``: append-only; for each question id the last line wins."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[str, QuestionResult]:
        """Every question journaled so far (cutting off a line torn by a crash, so appends start clean)."""
        if not self.path.exists():
            return {}
        data = self.path.read_bytes()
        complete = data.rfind(b"\n") + 1
        if complete < len(data):
            log.warning("%s: dropping a line cut short by an interrupted run", self.path)
            with self.path.open("r+b") as handle:
                handle.truncate(complete)
        results: dict[str, QuestionResult] = {}
        for number, line in enumerate(data[:complete].decode("utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                result = QuestionResult.model_validate_json(line)
            except ValidationError as exc:
                raise WireDecodeError("invalid_results", f"{self.path}:{number}: {exc.errors()[0]['msg']}") from None
            results[result.question_id] = result
        return results

    def append(self, result: QuestionResult) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(result.model_dump_json() + "\n")
            handle.flush()
            os.fsync(handle.fileno())


def write_json(path: Path, value: Any) -> None:
    """Replace ``path`` with ``value`` as indented JSON, atomically (a reader never sees half a file)."""
    _replace(path, json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def write_hypotheses(path: Path, results: Iterable[QuestionResult]) -> None:
    """The official evaluator's input: one ``{"question_id", "hypothesis"}`` object per line."""
    _replace(path, "".join(json.dumps({"question_id": r.question_id, "hypothesis": r.hypothesis},
                                      ensure_ascii=False) + "\n" for r in results))


def _replace(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
