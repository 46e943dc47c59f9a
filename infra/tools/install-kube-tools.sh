#!/usr/bin/env bash
# Installs what the chart's real-cluster test needs, from package registries only, into a cache that survives runs:
#   kube-apiserver, kube-controller-manager, kube-scheduler  built from k8s.io/kubernetes on the Go module proxy,
#       through a wrapper module (the ./staging modules are not in the module zip: each is replaced by its published
#       v0.<minor>.<patch>), with the version in ldflags so the server reports it and Helm's kubeVersion check passes
#   kwok        built from the Go module proxy (sigs.k8s.io/kwok/cmd/kwok): fakes a Ready node and running pods
#   etcd        Debian's etcd-server, installed with apt-get when /usr/bin/etcd is missing
#   CRDs        ServiceMonitor and PrometheusRule (prometheus-operator module), ScaledObject (KEDA module)
# helm itself comes from infra/tools/install-helm-tools.sh.
#
# Idempotent: what is already in the cache is not built or fetched again. Prints the tool folder and the CRD folder on
# stdout's last two lines ("OM_KUBE_TOOLS=<dir>", "OM_KUBE_CRDS=<dir>"). Usage: infra/tools/install-kube-tools.sh
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.34.4}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
PROM_OPERATOR_VERSION="${PROM_OPERATOR_VERSION:-v0.85.0}"
KEDA_VERSION="${KEDA_VERSION:-v2.21.0}"

CACHE="${OM_TOOLS_CACHE:-$HOME/.cache/om-stream/tools}"
DEST="$CACHE/kube-$KUBE_VERSION"
CRDS="$CACHE/kube-crds"
mkdir -p "$CACHE" "$CRDS"

log() { echo "install-kube-tools: $*" >&2; }
need_go() { command -v go >/dev/null || { log "go is needed to $1 (the Go module proxy serves the source)"; exit 1; }; }
module_dir() {  # module_dir MODULE@VERSION -> the unpacked module in the Go module cache
  GOFLAGS=-mod=mod go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p'
}

# -- etcd ----------------------------------------------------------------------------------------------------------
if [ -x /usr/bin/etcd ]; then
  log "etcd present: $(/usr/bin/etcd --version | head -1)"
else
  log "installing Debian's etcd-server"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends etcd-server >&2 \
    || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends etcd-server >&2; }
  # the package starts no daemon here (no systemd); the tests start their own etcd on a temp data dir
fi

# -- Kubernetes control plane --------------------------------------------------------------------------------------
if [ -x "$DEST/kube-apiserver" ] && [ -x "$DEST/kube-controller-manager" ] && [ -x "$DEST/kube-scheduler" ]; then
  log "Kubernetes $KUBE_VERSION control plane cached at $DEST"
else
  need_go "build kube-apiserver"
  started=$SECONDS
  wrapper="$(mktemp -d "$CACHE/.build-kube.XXXXXX")"
  trap 'rm -rf "$wrapper"' EXIT
  staging_version="v0.${KUBE_VERSION#v1.}"
  kube_dir="$(module_dir "k8s.io/kubernetes@$KUBE_VERSION")"
  log "building kube-apiserver, kube-controller-manager, kube-scheduler $KUBE_VERSION (2 cores: about 6 min cold)"
  {
    echo "module om-stream.local/kube-build"
    echo
    echo "go $(sed -n 's/^go \([0-9.]*\)$/\1/p' "$kube_dir/go.mod")"
    echo
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    echo
    # every "k8s.io/x => ./staging/src/k8s.io/x" of Kubernetes' go.mod becomes "k8s.io/x => k8s.io/x v0.34.N"
    sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/src/.*$#replace \1 => \1 '"$staging_version"'#p' \
      "$kube_dir/go.mod"
  } >"$wrapper/go.mod"
  grep -q '^replace k8s.io/api ' "$wrapper/go.mod" || { log "no staging replaces found in $kube_dir/go.mod"; exit 1; }
  pkg=k8s.io/component-base/version
  minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
  ldflags="-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  mkdir -p "$wrapper/bin"
  (cd "$wrapper" && CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false -trimpath" go build -ldflags "$ldflags" \
    -o bin/ k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler)
  mkdir -p "$DEST"
  mv "$wrapper"/bin/* "$DEST/"
  log "control plane $KUBE_VERSION built in $((SECONDS - started))s ($(du -sh "$DEST" | cut -f1))"
fi
"$DEST/kube-apiserver" --version | grep -qx "Kubernetes $KUBE_VERSION" \
  || { log "$DEST/kube-apiserver reports '$("$DEST/kube-apiserver" --version)', not $KUBE_VERSION"; exit 1; }

# -- kwok ----------------------------------------------------------------------------------------------------------
if [ -x "$DEST/kwok" ]; then
  log "kwok $KWOK_VERSION cached at $DEST"
else
  need_go "build kwok"
  started=$SECONDS
  tmp="$(mktemp -d "$CACHE/.build-kwok.XXXXXX")"
  GOBIN="$tmp" CGO_ENABLED=0 GOFLAGS="-buildvcs=false -trimpath" \
    go install -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  mkdir -p "$DEST"
  mv "$tmp/kwok" "$DEST/kwok"
  rm -rf "$tmp"
  log "kwok $KWOK_VERSION built in $((SECONDS - started))s"
fi

# kwok's own stage definitions (from its module): nodes turn Ready and keep a heartbeat, pods turn Ready, pods of
# Jobs complete, deleted pods go away. kwok reads them with --config.
stages="$DEST/kwok-stages.yaml"
if [ -s "$stages" ]; then
  log "kwok stages cached at $stages"
else
  need_go "fetch the kwok module"
  kwok_dir="$(module_dir "sigs.k8s.io/kwok@$KWOK_VERSION")"
  for stage in node/fast/node-initialize node/heartbeat/node-heartbeat pod/fast/pod-ready pod/fast/pod-complete \
               pod/fast/pod-delete; do
    echo "---"
    cat "$kwok_dir/kustomize/stage/$stage.yaml"
  done >"$stages.tmp"
  mv "$stages.tmp" "$stages"
  log "kwok stages written to $stages"
fi

# -- CRDs the chart renders against --------------------------------------------------------------------------------
crd() {  # crd MODULE@VERSION PATH-IN-MODULE OUT-NAME
  local out="$CRDS/$3"
  if [ -s "$out" ]; then
    log "CRD $3 cached"
    return
  fi
  need_go "fetch $1"
  local dir
  dir="$(module_dir "$1")"
  [ -f "$dir/$2" ] || { log "$1 has no $2"; exit 1; }
  cp "$dir/$2" "$out.tmp"
  chmod 0644 "$out.tmp"
  mv "$out.tmp" "$out"
  log "CRD $3 taken from $1"
}
prom="github.com/prometheus-operator/prometheus-operator@$PROM_OPERATOR_VERSION"
crd "$prom" example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml \
  "servicemonitors-$PROM_OPERATOR_VERSION.yaml"
crd "$prom" example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml \
  "prometheusrules-$PROM_OPERATOR_VERSION.yaml"
crd "github.com/kedacore/keda/v2@$KEDA_VERSION" config/crd/bases/keda.sh_scaledobjects.yaml \
  "scaledobjects-keda-$KEDA_VERSION.yaml"

echo "OM_KUBE_TOOLS=$DEST"
echo "OM_KUBE_CRDS=$CRDS"
