"""``python -m om_stream.devservices up|down|status|fetch`` (what ``make services-up`` / ``services-down`` run)."""

from __future__ import annotations

import argparse
import json
import sys

from om_stream.devservices import DevServiceError, jaeger, services_down, services_up, state_file
from om_stream.devservices.jvm import class_path, pid_alive


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m om_stream.devservices",
                                     description="Local Apache Kafka, Apache Cassandra and Jaeger for development")
    parser.add_argument("command", choices=["up", "down", "status", "fetch"])
    parser.add_argument("--cassandra-nodes", type=int, default=1, metavar="N",
                        help="up: Cassandra as a cluster of N nodes on loopback addresses of their own (replication "
                             "min(N, 3)); default 1")
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            for service in ("kafka", "cassandra"):
                print(f"{service}: {class_path(service)}")
            print(f"jaeger: {jaeger.binary()}")
        elif args.command == "up":
            env = services_up(args.cassandra_nodes)
            print(f"Kafka bootstrap:       {env['OM_KAFKA_BOOTSTRAP']}")
            print(f"Cassandra contact:     {env['OM_CASSANDRA_HOSTS']}")
            print(f"Jaeger OTLP / query:   {env['OM_OTLP_ENDPOINT']} (gRPC {env['OM_OTLP_GRPC_ENDPOINT']}) / "
                  f"{env['OM_JAEGER_QUERY']}")
            print("Use them from tests and the worker with:")
            for key, value in env.items():
                print(f"  export {key}={value}")
        elif args.command == "down":
            print("stopped" if services_down() else "nothing was running")
        else:
            path = state_file()
            if not path.exists():
                print("not running")
                return 1
            state = json.loads(path.read_text())
            alive = [pid for pid in state["pids"] if pid_alive(pid)]
            print(json.dumps({**state["env"], "alive_pids": alive}, indent=2))
            return 0 if len(alive) == len(state["pids"]) else 1
    except DevServiceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
