#!/bin/sh
# Removes from an installed virtualenv what the worker and `om-stream demo` never load, then byte-compiles what
# they do. Run inside the image build (Dockerfile), on the dependency venv.
#   - every __pycache__: pip's byte code covers every module of every package (150 MB here), most of which
#     om-stream never loads
#   - test suites shipped inside packages (numpy/*/tests, regex/tests, ...) and C headers (numpy/_core/include)
#   - litellm's proxy admin UI (litellm/proxy/_experimental/out: static web files the proxy server serves; the
#     library calls om-stream makes never read them)
#   - onnxruntime's model-conversion tool kits (transformers, quantization, tools): inference needs only capi
# Byte code is then written for the modules that importing each installed top-level package loads; a module loaded
# lazily later is compiled in memory when first imported. The pyc files are unchecked-hash: the image is read-only
# to its user (uid 10001 cannot write __pycache__), so without them every start would compile litellm again, and
# the sources never change under an image, so checking timestamps or hashes at each import buys nothing.
# Usage: trim-venv.sh VENV
set -eu
venv="$1"
site="$(echo "$venv"/lib/python3.*/site-packages)"
[ -d "$site" ] || { echo "trim-venv: no site-packages under $venv" >&2; exit 1; }
before="$(du -sk "$site" | cut -f1)"

find "$site" -depth -type d -name __pycache__ -exec rm -rf {} +
find "$site" -depth -type d -name tests -path '*/site-packages/*/*' -exec rm -rf {} +
rm -rf "$site"/numpy/_core/include "$site"/litellm/proxy/_experimental/out \
  "$site"/onnxruntime/transformers "$site"/onnxruntime/quantization "$site"/onnxruntime/tools

LITELLM_LOCAL_MODEL_COST_MAP=True "$venv/bin/python" -B - "$site" <<'PY'
import importlib
import py_compile
import sys
from importlib.util import cache_from_source
from pathlib import Path

site = Path(sys.argv[1])
names = sorted({entry.name.removesuffix(".py") for entry in site.iterdir()
                if not entry.name.startswith("_") and "." not in entry.name.removesuffix(".py")
                and ((entry / "__init__.py").exists() or entry.suffix == ".py")})
failed = []
for name in names:
    try:
        importlib.import_module(name)
    except Exception as error:  # an optional extra not installed: what did load is still compiled
        failed.append(f"{name} ({type(error).__name__})")
loaded = {getattr(module, "__file__", None) for module in list(sys.modules.values())}
sources = sorted(s for s in loaded if s and s.endswith(".py") and s.startswith(str(site)))
for source in sources:
    py_compile.compile(source, cache_from_source(source), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
print(f"trim-venv: byte-compiled the {len(sources)} modules that importing {len(names)} packages loads"
      + (f"; could not import {', '.join(failed)}" if failed else ""), file=sys.stderr)
PY
after="$(du -sk "$site" | cut -f1)"
echo "trim-venv: $site ${before} KiB -> ${after} KiB" >&2
