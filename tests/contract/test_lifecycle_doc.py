"""docs/lifecycle.md states what the code computes: its table is generated from ``om_stream.retention``, and the
figures its prose quotes (the longest window, the longest dead-letter retention within the promise, the variables it
names) are the code's."""

from __future__ import annotations

import re
from pathlib import Path

from om_stream.observability.settings_doc import render, settings_docs
from om_stream.retention import longest_window, topic_policies, windows, windows_beyond_promise
from om_stream.settings import KafkaSettings, LifecycleSettings

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "lifecycle.md"


def _policies(lifecycle: LifecycleSettings) -> list:  # type: ignore[type-arg]
    return topic_policies(KafkaSettings(), lifecycle, resource_scope=True, changelogs=["app-om_records-changelog"])


def test_the_lifecycle_table_is_generated_from_the_code() -> None:
    text = DOC.read_text()
    assert "<!-- BEGIN GENERATED: lifecycle-table -->" in text
    assert render(text) == text, "run `make docs-operate`"


def test_the_figures_the_prose_quotes_are_the_codes() -> None:
    text = DOC.read_text()
    defaults = LifecycleSettings()
    assert f"the longest window is the dead-letter topic's, **{longest_window(_policies(defaults), defaults)}**" in text
    found = {(w.topic, w.subject): str(w) for ws in windows(_policies(defaults), defaults).values() for w in ws}
    assert f"`om.messages`: 1 h + 1 d + 7 d + 5 min + 1 min = {found[('om.messages', 'records')]}" in text
    assert f"{found[('om.context', 'values')]} at the defaults" in text
    assert f"{found[('om.context', 'keys')]} at the defaults" in text
    # the longest dead-letter retention the doc says keeps the 30-day promise, and not a second more
    assert "may keep up to 28 d 22 h 54 min\n(`OM_LIFECYCLE_DLQ_RETENTION_S=2501640`)" in text
    within = LifecycleSettings(dlq_retention_s=2_501_640)
    assert windows_beyond_promise(_policies(within), within) == []
    beyond = LifecycleSettings(dlq_retention_s=2_501_641)
    assert [w.topic for w in windows_beyond_promise(_policies(beyond), beyond)] == ["om.dlq"]


def test_every_variable_the_doc_names_is_a_setting() -> None:
    named = set(re.findall(r"OM_[A-Z_]*[A-Z](?![A-Z_*])", DOC.read_text()))  # not OM_LIFECYCLE_*
    assert named and named <= {doc.env for doc in settings_docs()}
