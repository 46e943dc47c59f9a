"""The ``om-stream`` command line. Parses arguments, configures logging once, and hands over to the runtime."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from om_stream import __version__
from om_stream.errors import OMError

if TYPE_CHECKING:
    from om_stream.core.config import OMConfig
    from om_stream.eval.longmemeval.harness import EvalModels

__all__ = ["build_parser", "main"]


# ``settings.WorkerRole``, spelled out so that ``om-stream --help`` imports no settings (a unit test keeps them equal)
WORKER_ROLES = ("all", "memory", "models", "recall")


def _number_or_false(value: str) -> float | bool:
    if value.lower() == "false":
        return False
    return float(value)


def _threshold_options(args: argparse.Namespace) -> dict[str, Any]:
    base: dict[str, Any] = {}
    if args.config:
        loaded: dict[str, Any] = yaml.safe_load(Path(args.config).read_text()) or {}
        base = dict(loaded.get("observationalMemory") or loaded)
    observation = dict(base.get("observation", {}))
    reflection = dict(base.get("reflection", {}))
    for flag, group, key in (("message_tokens", observation, "messageTokens"),
                             ("buffer_tokens", observation, "bufferTokens"),
                             ("buffer_activation", observation, "bufferActivation"),
                             ("block_after", observation, "blockAfter"),
                             ("observation_tokens", reflection, "observationTokens"),
                             ("reflection_buffer_activation", reflection, "bufferActivation"),
                             ("reflection_block_after", reflection, "blockAfter")):
        value = getattr(args, flag)
        if value is not None:
            group[key] = value
    return {**base, "observation": observation, "reflection": reflection}


def _add_threshold_flags(parser: argparse.ArgumentParser, *, default_model: str = "offline") -> None:
    parser.add_argument("--config", help="YAML file with the observationalMemory options")
    parser.add_argument("--message-tokens", type=int, help="observation.messageTokens")
    parser.add_argument("--buffer-tokens", type=_number_or_false, help="observation.bufferTokens (number or false)")
    parser.add_argument("--buffer-activation", type=float, help="observation.bufferActivation")
    parser.add_argument("--block-after", type=float, help="observation.blockAfter")
    parser.add_argument("--observation-tokens", type=int, help="reflection.observationTokens")
    parser.add_argument("--reflection-buffer-activation", type=float, help="reflection.bufferActivation")
    parser.add_argument("--reflection-block-after", type=float, help="reflection.blockAfter")
    parser.add_argument("--model", default=default_model,
                        help=f"OM's models: 'offline', 'config' (the models of the --config options: by default "
                             f"google/gemini-2.5-flash) or any litellm model, e.g. openai/gpt-5-mini "
                             f"(default: {default_model})")
    parser.add_argument("--api-base", help="API base URL for --model (also read from the provider's env vars)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="om-stream",
                                     description="Observational Memory for AI agents, as a Kafka sidecar")
    parser.add_argument("--version", action="version", version=f"om-stream {__version__}")
    parser.add_argument("--log-level", default="warning")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("version", help="print the version")
    demo = sub.add_parser("demo", help="replay a sample conversation through OM (no broker, no key needed)")
    demo.add_argument("--model", default=None, help="a litellm model to use instead of the offline model")
    demo.add_argument("--api-base", help="API base URL for --model")
    rep = sub.add_parser("replay", help="replay a conversation file (JSONL) through OM and write a report")
    rep.add_argument("file", type=Path)
    rep.add_argument("--report", type=Path, required=True, help="where to write the JSON report")
    rep.add_argument("--no-drain", action="store_true",
                     help="do not wait for background cycles between messages (as a fast agent would)")
    rep.add_argument("--db", type=Path, default=None,
                     help="keep messages and observations in this SQLite file (default: SQLite in memory)")
    _add_threshold_flags(rep)
    worker = sub.add_parser("worker", help="run the Kafka sidecar (settings from OM_* environment variables)")
    worker.add_argument("--role", choices=WORKER_ROLES, default=None,
                        help="what this process runs: all (default), memory, models or recall; overrides "
                             "OM_WORKER_ROLE (a split deployment runs memory + models (+ recall), never all beside "
                             "them)")
    sub.add_parser("migrate", help="create or upgrade the Cassandra keyspace (idempotent)")
    export = sub.add_parser("export", help="write everything a worker deployment holds for one resource as "
                                           "om.export/v1 JSON Lines (settings from OM_* like the worker)")
    export.add_argument("--resource", required=True, help="the resource id")
    export.add_argument("--out", type=Path, default=None, help="the file to write (default: standard output)")
    imports = sub.add_parser("import", help="rebuild a resource's memory from an export in a worker deployment "
                                            "(settings from OM_* like the worker)")
    imports.add_argument("file", help="an om.export/v1 file ('-': standard input)")
    imports.add_argument("--force", action="store_true",
                         help="import although the deployment holds the resource already (run an import that "
                              "failed part-way again)")
    schemas = sub.add_parser("schemas", help="export the wire JSON Schemas, or check them against the models")
    schemas.add_argument("action", choices=["export", "check"])
    schemas.add_argument("--dir", type=Path, default=Path("schemas"), help="the schemas folder (default: schemas)")
    evaluate = sub.add_parser("eval", help="run a memory benchmark through OM (needs model keys)")
    benchmarks = evaluate.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    lme = benchmarks.add_parser(
        "longmemeval", help="LongMemEval (_S, _M or oracle): replay each question's sessions through OM, answer "
                            "with a reader model, grade with a judge model, summarise")
    lme.add_argument("dataset", type=Path, help="a LongMemEval JSON file (longmemeval_s.json, ...)")
    lme.add_argument("--out", type=Path, default=None,
                     help="results folder (default: longmemeval-<dataset name>); a run given the same folder "
                          "resumes: questions already answered are not asked again")
    lme.add_argument("--reader-model", default="openai/gpt-4o", help="the model answering with OM's context")
    lme.add_argument("--judge-model", default="openai/gpt-4o", help="the model grading the answers")
    lme.add_argument("--reader-api-base", help="API base URL for the reader (default: --api-base, else env)")
    lme.add_argument("--judge-api-base", help="API base URL for the judge (default: --api-base, else env)")
    lme.add_argument("--concurrency", type=_positive, default=4, help="questions in flight at once (default 4)")
    lme.add_argument("--limit", type=_positive, default=None, help="only the first N questions of the file")
    lme.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    _add_threshold_flags(lme, default_model="config")
    gen = sub.add_parser("synth", help="write a synthetic conversation file for benchmarks")
    gen.add_argument("file", type=Path)
    gen.add_argument("--turns", type=int, default=2000)
    gen.add_argument("--seed", type=int, default=42)
    from om_stream.replay.shapes import SHAPES

    gen.add_argument("--shape", choices=list(SHAPES), default="project",
                     help="conversation shape (default: project, the first generator): "
                          + "; ".join(f"{name}: {shape.summary}" for name, shape in SHAPES.items()))
    return parser


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def _model(name: str | None, api_base: str | None) -> tuple[Any, str]:
    """The chat model for a CLI run: the offline model; the model gateway routing each role as the OM options
    say (``config``); or the gateway with one litellm model for every role (any other name). The API base is
    ``--api-base``, else the provider's usual environment variable (``OPENAI_API_BASE``, ...)."""
    if not name or name == "offline":
        return None, "offline"
    from om_stream.adapters.gateway import GatewaySettings, ModelGateway, gateway_for_cli

    if name == "config":
        settings = GatewaySettings(api_bases={"*": api_base} if api_base else {})
        return ModelGateway(settings), "configured models"
    return gateway_for_cli(name, api_base), name


def _replay(args: argparse.Namespace) -> int:
    from om_stream.adapters.sqlite_store import SqliteContentStore
    from om_stream.core.config import OMConfig
    from om_stream.replay.conversation import load_turns
    from om_stream.replay.runner import replay

    options = OMConfig.parse(_threshold_options(args))
    turns = load_turns(args.file)
    model, _label = _model(args.model, args.api_base)
    store = SqliteContentStore(args.db) if args.db else None
    result = asyncio.run(replay(turns, options, model=model, drain=not args.no_drain, store=store))
    report = result.report()
    args.report.write_text(json.dumps(report, indent=2))
    timing = report["timing"]["overhead_ms"]
    totals = report["totals"]
    print(f"{len(turns)} turns replayed; engine overhead per turn mean {timing['mean']:.3f} ms "
          f"(p50 {timing['p50']:.3f}, p90 {timing['p90']:.3f}); tokens sent to models "
          f"{totals['tokens_sent_to_models']:,}; report: {args.report}")
    return 0


def _eval_models(args: argparse.Namespace, options: OMConfig) -> EvalModels:
    """OM's models (as ``--model`` says), the reader and the judge: each a gateway of its own, configured by the
    ``OM_GATEWAY_*`` settings (timeouts, retries, keys, prices), the API bases given or the providers' env vars."""
    from om_stream.adapters.gateway import ModelGateway, gateway_for_cli
    from om_stream.eval.longmemeval.harness import EvalModels
    from om_stream.ports import ChatModel
    from om_stream.settings import Settings

    gateway = Settings().gateway
    om: ChatModel | None
    if args.model == "offline":
        om, om_label = None, "offline"
    elif args.model == "config":
        bases = {"*": args.api_base} if args.api_base else {}
        om = ModelGateway(gateway.model_copy(update={"api_bases": {**gateway.api_bases, **bases}}))
        resolved = options.resolve()
        om_label = f"observer {resolved.observer_model}, reflector {resolved.reflector_model}"
    else:
        om, om_label = gateway_for_cli(args.model, args.api_base, settings=gateway), args.model
    return EvalModels(
        om=om, om_label=om_label,
        reader=gateway_for_cli(args.reader_model, args.reader_api_base or args.api_base, settings=gateway),
        reader_model=args.reader_model,
        judge=gateway_for_cli(args.judge_model, args.judge_api_base or args.api_base, settings=gateway),
        judge_model=args.judge_model)


def _eval_longmemeval(args: argparse.Namespace) -> int:
    from om_stream.core.config import OMConfig
    from om_stream.eval.longmemeval.harness import LongMemEvalRun, run_longmemeval
    from om_stream.eval.longmemeval.summary import render

    if not args.dataset.is_file():
        print(f"om-stream: no dataset file at {args.dataset} (LongMemEval's longmemeval_s.json, _m or oracle)",
              file=sys.stderr)
        return 2
    options = OMConfig.parse(_threshold_options(args))
    models = _eval_models(args, options)
    out = args.out or Path(f"longmemeval-{args.dataset.stem}")
    plan = LongMemEvalRun(dataset=args.dataset, out=out, options=options, models=models,
                          concurrency=args.concurrency, limit=args.limit,
                          progress=None if args.no_progress else sys.stderr)
    try:
        outcome = asyncio.run(run_longmemeval(plan))
    except KeyboardInterrupt:
        print(f"om-stream: interrupted; what was answered is kept in {out}: run the same command to resume",
              file=sys.stderr)
        return 130
    print(render(outcome.summary))
    print(f"results: {outcome.folder} (hypotheses.jsonl for LongMemEval's evaluator, summary.json, results.jsonl)")
    for failure in outcome.failures:
        print(f"om-stream: question {failure.question_id} failed ({failure.stage}): {failure.error}",
              file=sys.stderr)
    if outcome.failures:
        print(f"om-stream: {len(outcome.failures)} question(s) failed; run the same command to ask them again",
              file=sys.stderr)
        return 1
    return 0


def _demo(args: argparse.Namespace) -> int:
    from om_stream.replay.demo import run_demo
    from om_stream.settings import Settings

    # a model configured for the worker (OM_MEMORY_MODEL, with its provider's key) is used by the demo too
    configured = Settings().memory
    model, label = _model(args.model or configured.model, args.api_base or configured.api_base)
    asyncio.run(run_demo(sys.stdout, model=model, model_label=label))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        if args.command == "version":
            print(__version__)
        elif args.command == "demo":
            return _demo(args)
        elif args.command == "replay":
            return _replay(args)
        elif args.command == "worker":
            from om_stream.runtime.worker.main import main as worker_main

            return worker_main(args.role)
        elif args.command == "migrate":
            from om_stream.adapters.cassandra_store.schema_migrations import migrate
            from om_stream.settings import Settings

            report = migrate(Settings().cassandra)
            print(f"keyspace {report.keyspace}: applied {report.applied or 'nothing new'}; "
                  f"already at {report.already or 'none'}")
        elif args.command in ("export", "import"):
            from om_stream.runtime.worker.transfer import export_command, import_command
            from om_stream.settings import Settings

            if args.command == "export":
                return export_command(Settings(), args.resource, args.out)
            return import_command(Settings(), args.file, force=args.force)
        elif args.command == "schemas":
            from om_stream.wire.schemas import check_schemas, export_schemas

            if args.action == "export":
                print(f"{len(export_schemas(args.dir))} schema files written to {args.dir}")
                return 0
            drift = check_schemas(args.dir)
            for line in drift:
                print(line, file=sys.stderr)
            print("schemas in sync with the models" if not drift else f"{len(drift)} difference(s): run "
                  f"'om-stream schemas export' and commit the result")
            return 1 if drift else 0
        elif args.command == "eval":
            return _eval_longmemeval(args)
        elif args.command == "synth":
            from om_stream.replay import shapes, synthetic

            lines = (synthetic.write_jsonl(args.file, args.turns, seed=args.seed) if args.shape == "project" else
                     shapes.write_jsonl(args.file, shapes.generate(args.shape, args.turns, seed=args.seed)))
            print(f"{lines} lines written to {args.file}")
        else:
            parser.print_help()
    except OMError as exc:
        print(f"om-stream: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
