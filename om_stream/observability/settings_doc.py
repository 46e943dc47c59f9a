"""Operator documentation generated from the code: the ``OM_*`` settings table, the metrics table, the topics' data
lifecycle table (docs/lifecycle.md), and the part of the Helm chart's ``values.schema.json`` that maps every setting
1:1 — so none of them can drift from ``settings.py``, ``observability.metrics`` or ``retention``.

    python -m om_stream.observability.settings_doc --write docs/operate.md   rewrite the generated sections
    python -m om_stream.observability.settings_doc --write docs/lifecycle.md (the same, for that page)
    python -m om_stream.observability.settings_doc --check docs/operate.md   exit 1 if they are out of date
    python -m om_stream.observability.settings_doc --chart-schema            the chart's settings/secrets schema
    python -m om_stream.observability.settings_doc --sync-chart SCHEMA       write it into values.schema.json

Generated sections sit between ``<!-- BEGIN GENERATED: name -->`` and ``<!-- END GENERATED: name -->`` markers.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, SecretStr

from om_stream.observability.metrics import describe_metrics
from om_stream.retention import CompactedPolicy, erasure_windows, segment_roll_interval_ms, topic_policies
from om_stream.settings import KafkaSettings, LifecycleSettings, Settings

__all__ = ["CHART_MANAGED", "SettingDoc", "chart_settings_schema", "lifecycle_table", "metrics_table", "render",
           "settings_docs", "settings_table"]

# set by the chart itself from other values (the pod must listen on every interface for probes and scrapes)
CHART_MANAGED = {"OM_WORKER_WEB_HOST": "0.0.0.0 (always, in the pod)", "OM_WORKER_WEB_PORT": "`service.port`",
                 "OM_WORKER_METRICS_HOST": "0.0.0.0 (always, in the pod)", "OM_WORKER_METRICS_PORT": "`metrics.port`",
                 "OM_WORKER_ALLOW_UNAUTHENTICATED": "`apiAuth.allowUnauthenticated`",
                 "OM_KAFKA_GROUP_INSTANCE_ID": "the pod name (`staticMembership.enabled`)",
                 "OM_WORKER_ROLE": "per workload (the StatefulSet runs `all`, or `memory` beside a models "
                                   "Deployment)"}


@dataclass(frozen=True)
class SettingDoc:
    env: str
    type: str  # string, integer, number, boolean, json (a JSON object in a string)
    default: Any
    description: str
    secret: bool
    nullable: bool
    choices: tuple[str, ...] = ()


def _describe(annotation: Any) -> tuple[str, bool, bool, tuple[str, ...]]:
    """(JSON type, nullable, secret, choices) of a settings field's annotation."""
    nullable = False
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        nullable = len(args) < len(get_args(annotation))
        annotation = args[0]
        origin = get_origin(annotation)
    if origin is Literal:
        return "string", nullable, False, tuple(str(a) for a in get_args(annotation))
    if annotation is SecretStr:
        return "string", nullable, True, ()
    if origin is dict:  # a table, given as a JSON object; a table of secrets is a secret
        return "json", nullable, get_args(annotation)[1] is SecretStr, ()
    kinds = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if annotation not in kinds:
        raise TypeError(f"settings_doc: no JSON type for {annotation!r}")
    return kinds[annotation], nullable, False, ()


def settings_docs() -> list[SettingDoc]:
    """Every ``OM_*`` environment variable ``Settings`` reads, in declaration order."""
    docs: list[SettingDoc] = []
    for group, field in Settings.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            for name, sub in annotation.model_fields.items():
                kind, nullable, secret, choices = _describe(sub.annotation)
                default = None if secret else sub.get_default(call_default_factory=True)
                if isinstance(default, dict):
                    default = json.dumps(default)
                docs.append(SettingDoc(f"OM_{group}_{name}".upper(), kind, default, sub.description or "", secret,
                                       nullable, choices))
        else:
            kind, nullable, secret, choices = _describe(annotation)
            docs.append(SettingDoc(f"OM_{group}".upper(), kind, field.default, field.description or "", secret,
                                   nullable, choices))
    return docs


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _default(doc: SettingDoc) -> str:
    if doc.secret:
        return "(secret)"
    if doc.default is None:
        return "unset"
    if isinstance(doc.default, bool):
        return f"`{str(doc.default).lower()}`"
    return f"`{doc.default}`" if doc.default != "" else '`""`'


def settings_table() -> str:
    lines = ["| variable | default | description |", "|---|---|---|"]
    for doc in settings_docs():
        description = doc.description
        if doc.choices:
            description += f" (one of {', '.join(doc.choices)})"
        if doc.secret:
            description += "; a Secret in the Helm chart"
        lines.append(f"| `{doc.env}` | {_default(doc)} | {_cell(description)} |")
    return "\n".join(lines)


def metrics_table() -> str:
    lines = ["| metric (series) | type | labels | meaning |", "|---|---|---|---|"]
    for info in describe_metrics():
        series = ", ".join(f"`{s}`" for s in info.series)
        labels = ", ".join(f"`{label}`" for label in info.labels) or "—"
        lines.append(f"| {series} | {info.type} | {labels} | {_cell(info.help)} |")
    return "\n".join(lines)


def lifecycle_table() -> str:
    """Every topic that can hold a thread's data, what it holds, how it is kept and how long after an erase it may
    still hold it, at the default settings."""
    lifecycle = LifecycleSettings()
    roll = segment_roll_interval_ms(lifecycle)
    policies = topic_policies(KafkaSettings(), lifecycle, resource_scope=True,
                              changelogs=["<app_id>-om_records-changelog"])
    lines = ["| topic | holds | kept | gone within, after an erase | set by |", "|---|---|---|---|---|"]
    for policy in policies:
        found = erasure_windows(policy, roll_interval_ms=roll)
        if isinstance(policy, CompactedPolicy):
            kept = (f"compacted; max.compaction.lag.ms {_days(policy.max_compaction_lag_ms)}, delete.retention.ms "
                    f"{_days(policy.tombstone_retention_ms)}")
            gone = f"its records: {found[0]}; the tombstone (the key alone): {found[1]}"
            by = "`OM_LIFECYCLE_MAX_COMPACTION_LAG_S`, `OM_LIFECYCLE_TOMBSTONE_RETENTION_S`"
        else:
            kept = f"retention.ms {_days(policy.retention_ms)}, segment.ms {_days(policy.segment_ms)}"
            gone = str(found[0])
            by = f"`{policy.setting}`"
        note = " (resource scope only)" if policy.topic == KafkaSettings().topic_records else ""
        lines.append(f"| `{policy.topic}`{note} | {_cell(policy.holds)} | {kept} | {gone} | {by} |")
    return "\n".join(lines)


def _days(ms: int) -> str:
    days, rest = divmod(ms, 86_400_000)
    return f"{days} d" if not rest else f"{ms // 1000} s"


def chart_settings_schema() -> dict[str, Any]:
    """JSON schemas of the chart's ``settings`` (plain ``OM_*`` values → ConfigMap) and ``secrets`` (``SecretStr``
    settings → Secret) objects: one property per variable, nothing else accepted."""

    def prop(doc: SettingDoc) -> dict[str, Any]:
        schema: dict[str, Any] = {"description": doc.description}
        kind: Any = doc.type
        if doc.type == "boolean":  # a ConfigMap value is a string: "true"/"false" are accepted as well
            schema["anyOf"] = [{"type": "boolean"}, {"type": "string", "enum": ["true", "false"]}]
        elif doc.type in ("integer", "number"):
            schema["type"] = [kind, "string"]  # quoted numbers are fine: pydantic parses the variable
        else:
            schema["type"] = "string"
        if doc.choices:
            schema["enum"] = list(doc.choices)
        if doc.nullable and "anyOf" not in schema:
            schema["type"] = [*([schema["type"]] if isinstance(schema["type"], str) else schema["type"]), "null"]
        return schema

    docs = settings_docs()
    plain = {d.env: prop(d) for d in docs if not d.secret and d.env not in CHART_MANAGED}
    secret = {d.env: {"type": ["string", "null"], "description": d.description} for d in docs if d.secret}
    return {"settings": {"type": "object", "additionalProperties": False, "properties": plain},
            "secrets": {"type": "object", "additionalProperties": False, "properties": secret}}


_SECTION = re.compile(r"(<!-- BEGIN GENERATED: (?P<name>[a-z-]+) -->\n)(.*?)(<!-- END GENERATED: (?P=name) -->)",
                      re.DOTALL)


def render(document: str) -> str:
    """``document`` with every generated section rewritten."""
    makers = {"settings-table": settings_table, "metrics-table": metrics_table, "lifecycle-table": lifecycle_table}

    def replace(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in makers:
            raise ValueError(f"unknown generated section {name!r}")
        return f"{match.group(1)}{makers[name]()}\n{match.group(4)}"

    return _SECTION.sub(replace, document)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m om_stream.observability.settings_doc")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", type=Path, metavar="DOC")
    group.add_argument("--check", type=Path, metavar="DOC")
    group.add_argument("--chart-schema", action="store_true")
    group.add_argument("--sync-chart", type=Path, metavar="SCHEMA")
    args = parser.parse_args(argv)
    if args.chart_schema:
        print(json.dumps(chart_settings_schema(), indent=2))
        return 0
    if args.sync_chart:
        schema = json.loads(args.sync_chart.read_text())
        schema["properties"].update(chart_settings_schema())
        args.sync_chart.write_text(json.dumps(schema, indent=2) + "\n")
        return 0
    path: Path = args.write or args.check
    text = path.read_text()
    fresh = render(text)
    if args.write:
        path.write_text(fresh)
        return 0
    if fresh != text:
        print(f"{path}: generated sections are out of date; run `make docs-operate`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
