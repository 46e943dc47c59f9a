"""``make bench-instructions``: the engine's and the memory processor's work counted in instructions, not seconds.

On this machine the same CPU-time measure of the same code spreads by 25 to 50 % from one run to the next (the
virtual machine's neighbours are not ours to see), so a cut of a few per cent cannot be seen in seconds.
``valgrind --tool=callgrind`` counts the instructions a process executes: the same code on the same input gives the
same count whatever else the machine does (``PYTHONHASHSEED`` is fixed, so sets and dicts iterate alike).

Each workload runs twice under callgrind, once with its work and once without it (the same imports, the tokenizer
loaded, the conversation made), and the difference is divided by the work:

- ``engine``: ``bench/engine_cpu.py --turns N`` (the project conversation through the embedded runner, the offline
  model and the in-memory store; the offline model's instructions are included, as the whole replay's are);
- ``processor``: ``bench/tracing_cpu.py``'s workload with tracing off (the real memory processor and host on the
  in-memory store, N messages over 200 threads in batches of 20).

Instructions are not time (a cache miss costs more than an add), but two checkouts compared on the same workload
differ by what their code does. Prints one line per workload:
``workload=engine tree=... units=200 instructions_per_unit=...``. Under callgrind Python runs about 50 times
slower: the defaults take about 10 minutes.

    .venv/bin/python bench/instructions.py [--tree /path/to/other/checkout] [--turns 200] [--messages 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def counted(tree: Path, args: list[str]) -> int:
    """The instructions ``python args`` executes in ``tree``, counted by callgrind."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "callgrind.out"
        env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
        run = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, *args],
                             cwd=tree, env=env, capture_output=True, text=True, check=False)
        found = re.search(r"Collected : (\d+)", run.stderr)
        if run.returncode != 0 or found is None:
            raise SystemExit(f"callgrind of {args} in {tree} failed ({run.returncode}):\n{run.stderr[-2000:]}")
        return int(found.group(1))


def per_unit(tree: Path, workload: str, units: int) -> float:
    if workload == "engine":
        def command(n: int) -> list[str]:
            return ["bench/engine_cpu.py", "--turns", str(units), "--runs", str(n)]
    else:
        def command(n: int) -> list[str]:
            return [str(ROOT / "bench" / "instructions.py"), "--processor-run", str(units * n)]
    return (counted(tree, command(1)) - counted(tree, command(0))) / units


def processor_run(messages: int) -> None:
    """One run of the processor workload (``bench/tracing_cpu.py``, tracing off), in this process."""
    sys.path.insert(0, str(Path.cwd() / "bench"))
    import tracing_cpu  # the checkout measured is the one on sys.path

    if messages:
        asyncio.run(tracing_cpu.one_run(None, messages, 200, 20))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--only", choices=["engine", "processor"])
    parser.add_argument("--processor-run", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.processor_run is not None:
        processor_run(args.processor_run)
        return
    tree = args.tree.resolve()
    for workload, units in (("engine", args.turns), ("processor", args.messages)):
        if args.only in (None, workload):
            print(f"workload={workload} tree={tree} units={units} "
                  f"instructions_per_unit={per_unit(tree, workload, units):,.0f}", flush=True)


if __name__ == "__main__":
    main()
