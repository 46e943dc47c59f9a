"""Which agents a worker process runs, and in which consumer group (``OM_WORKER_ROLE``, ``om-stream worker --role``).

* ``all`` (the default): every agent in one Faust app and one consumer group, the app id: one process holds all.
* ``memory``: the table-owning ``memory`` agent (and ``ingest`` in resource scope), the state table, the timers and
  the ``/v1/*`` API. Group: the app id (the state table's namespace stays where ``all`` had it).
* ``models``: only ``model_workers`` (Observer/Reflector calls, the offline model, recall index writes). Group:
  ``<app_id>-models``, so adding or removing model workers never rebalances the memory workers. No table, no timers:
  a result goes to the results topic at the home partition the request came from, whoever owns it now.
* ``recall``: only the ``recall`` agent (``om.recall.requests`` → ``om.recall.responses``). Group:
  ``<app_id>-recall``.

A split deployment runs ``memory`` + ``models`` (+ ``recall``), never ``all`` beside them: ``all`` keeps the app id's
group, so an ``all`` worker and a ``models`` worker are two groups that both consume ``om.model-requests``, and
every request is answered twice. Nothing breaks (the second answer finds the first's stored result or its lease and
calls no model; the memory agent ignores a result whose cycle is already resolved), but it is wasted work. It is
not refused: a migration from ``all`` to a split passes through it.

Pure: no Faust, no Kafka. ``app.Worker`` reads the plan and defines what it lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from om_stream.settings import Settings, WorkerRole

__all__ = ["AGENTS", "ROLES", "RolePlan", "role_plan", "with_role"]

ROLES: tuple[WorkerRole, ...] = get_args(WorkerRole)
AGENTS = ("memory", "ingest", "model_workers", "recall")
_GROUP_SUFFIX: dict[WorkerRole, str] = {"all": "", "memory": "", "models": "-models", "recall": "-recall"}


@dataclass(frozen=True)
class RolePlan:
    role: WorkerRole
    group_id: str  # the Faust app id: consumer group, and namespace of tables and the data folder
    agents: tuple[str, ...]  # in AGENTS order

    @property
    def holds_table(self) -> bool:
        """The state table, its timers and the ``/v1/*`` API (which reads it) live with the memory agent."""
        return "memory" in self.agents

    @property
    def calls_models(self) -> bool:
        return "model_workers" in self.agents

    @property
    def answers_recall(self) -> bool:
        return "recall" in self.agents


def role_plan(role: WorkerRole, app_id: str, *, resource_scope: bool) -> RolePlan:
    """The agents of ``role`` (``ingest`` only in resource scope) and its consumer group."""
    if role not in ROLES:
        raise ValueError(f"unknown worker role {role!r}; use one of {', '.join(ROLES)}")
    memory = ("memory", "ingest") if resource_scope else ("memory",)
    wanted = {"all": (*memory, "model_workers", "recall"), "memory": memory, "models": ("model_workers",),
              "recall": ("recall",)}[role]
    return RolePlan(role, app_id + _GROUP_SUFFIX[role], tuple(a for a in AGENTS if a in wanted))


def with_role(settings: Settings, role: WorkerRole | None) -> Settings:
    """``settings`` with the worker role ``om-stream worker --role`` asked for (None: as ``OM_WORKER_ROLE`` says)."""
    if role is None:
        return settings
    if role not in ROLES:
        raise ValueError(f"unknown worker role {role!r}; use one of {', '.join(ROLES)}")
    return settings.model_copy(update={"worker": settings.worker.model_copy(update={"role": role})})
