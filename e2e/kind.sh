#!/usr/bin/env bash
# Cascade end to end on kind (machines with Docker): cluster, images, chart, a model.
#
#   e2e/kind.sh [up]   create the cluster (if needed), fake GPU nodes, build and load the
#                      three images, helm install charts/cascade, apply the example, wait
#                      for its Available condition and print `kubectl get md`
#   e2e/kind.sh down   delete the cluster
#
# kind nodes have no GPUs. The workers get fake extended-resource capacity
# (nvidia.com/gpu, rdma/ib) by patching the node *status* (the status subresource, with
# `kubectl patch --subresource=status`, or through `kubectl proxy` for kubectl < 1.24);
# the kubelet keeps capacity it does not manage and derives allocatable from it. They
# are also labelled with the topology labels the planner reads. The worker pods then
# schedule as on a GPU cluster; they do not touch a GPU in this release. The operator's
# namespace and the example's (default) enforce the `restricted` Pod Security Standard,
# so a pod the chart or the operator builds that breaks it is refused (docs/security.md).
#
# Environment (all optional):
#   CASCADE_E2E_CLUSTER        kind cluster name              (cascade-e2e)
#   CASCADE_E2E_NODE_IMAGE     kind node image                (kind's default)
#   CASCADE_E2E_REGISTRY       image repository prefix        (ghcr.io/cascade-dev)
#   CASCADE_E2E_TAG            image tag                      (e2e)
#   CASCADE_E2E_TORCH_INDEX_URL  index of the worker image's torch build; empty: PyPI's
#                              default, with CUDA libraries (several GB)
#                              (https://download.pytorch.org/whl/cpu: the small CPU build,
#                              which runs the engine on kind's GPU-less nodes)
#   CASCADE_E2E_GPUS           fake GPUs per worker node      (8)
#   CASCADE_E2E_EXAMPLE        manifest to apply              (examples/01-minimal/modeldeployment.yaml)
#   CASCADE_E2E_TIMEOUT        wait for Available             (10m)
set -euo pipefail
SELF="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$0")/.."

CLUSTER="${CASCADE_E2E_CLUSTER:-cascade-e2e}"
NODE_IMAGE="${CASCADE_E2E_NODE_IMAGE:-}"
REGISTRY="${CASCADE_E2E_REGISTRY:-ghcr.io/cascade-dev}"
TAG="${CASCADE_E2E_TAG:-e2e}"
TORCH_INDEX_URL="${CASCADE_E2E_TORCH_INDEX_URL-https://download.pytorch.org/whl/cpu}"
GPUS="${CASCADE_E2E_GPUS:-8}"
EXAMPLE="${CASCADE_E2E_EXAMPLE:-examples/01-minimal/modeldeployment.yaml}"
TIMEOUT="${CASCADE_E2E_TIMEOUT:-10m}"
RELEASE=cascade
NAMESPACE=cascade-system
CONTEXT="kind-${CLUSTER}"
COMPONENTS=(operator worker gateway)

log() { printf '\n==> %s\n' "$*" >&2; }
die() { printf 'kind.sh: %s\n' "$*" >&2; exit 1; }
k() { kubectl --context "${CONTEXT}" "$@"; }

require() {
  local tool
  for tool in "$@"; do
    command -v "${tool}" >/dev/null 2>&1 || die "${tool} is required (see e2e/README.md)"
  done
  docker info >/dev/null 2>&1 || die "the Docker daemon is not reachable"
}

image() { echo "${REGISTRY}/cascade-$1:${TAG}"; }

create_cluster() {
  if kind get clusters 2>/dev/null | grep -qx "${CLUSTER}"; then
    log "kind cluster ${CLUSTER} exists; reusing it"
    return
  fi
  log "creating kind cluster ${CLUSTER}"
  local args=(create cluster --name "${CLUSTER}" --config e2e/kind-config.yaml --wait 5m)
  if [[ -n "${NODE_IMAGE}" ]]; then
    args+=(--image "${NODE_IMAGE}")
  fi
  kind "${args[@]}"
}

# Advertise fake extended resources on one node through its status subresource.
patch_capacity() {
  local node="$1"
  local patch
  patch="$(printf '[{"op":"add","path":"/status/capacity/nvidia.com~1gpu","value":"%s"},{"op":"add","path":"/status/capacity/rdma~1ib","value":"%s"}]' "${GPUS}" "${GPUS}")"
  if kubectl patch --help 2>/dev/null | grep -q -- '--subresource'; then
    k patch node "${node}" --subresource=status --type=json -p "${patch}" >/dev/null
    return
  fi
  # kubectl < 1.24: PATCH the status endpoint through a local API proxy.
  local port=8011
  k proxy --port "${port}" >/dev/null 2>&1 &
  local proxy_pid=$!
  sleep 2
  local rc=0
  curl -fsS -X PATCH -H 'Content-Type: application/json-patch+json' --data "${patch}" \
    "http://127.0.0.1:${port}/api/v1/nodes/${node}/status" >/dev/null || rc=$?
  kill "${proxy_pid}"
  return "${rc}"
}

fake_gpu_nodes() {
  log "advertising ${GPUS} fake GPUs per worker node and labelling the topology"
  local nodes=() node i=0
  mapfile -t nodes < <(k get nodes -l '!node-role.kubernetes.io/control-plane,!node-role.kubernetes.io/master' -o name)
  [[ "${#nodes[@]}" -gt 0 ]] || die "no worker nodes in ${CLUSTER}"
  for node in "${nodes[@]}"; do
    node="${node#node/}"
    patch_capacity "${node}"
    k label node "${node}" --overwrite \
      topology.kubernetes.io/zone=e2e-zone-a \
      nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 \
      nvidia.com/gpu.clique="e2e-clique-${i}" \
      cascade.dev/leaf-switch="leaf-$((i % 2))" \
      cascade.dev/nic-in-mbit=100000 \
      cascade.dev/nic-out-mbit=100000 >/dev/null
    i=$((i + 1))
  done
  # The kubelet copies capacity into allocatable on its next status update.
  for node in "${nodes[@]}"; do
    node="${node#node/}"
    local tries=0
    until [[ "$(k get node "${node}" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" == "${GPUS}" ]]; do
      tries=$((tries + 1))
      [[ "${tries}" -le 60 ]] || die "node ${node}: nvidia.com/gpu never became allocatable"
      sleep 2
    done
  done
  k get nodes -L nvidia.com/gpu.product,cascade.dev/leaf-switch
}

build_images() {
  local component args
  for component in "${COMPONENTS[@]}"; do
    log "building $(image "${component}")"
    args=(build -f "Dockerfile.${component}" -t "$(image "${component}")")
    if [[ "${component}" == worker ]]; then
      args+=(--build-arg "TORCH_INDEX_URL=${TORCH_INDEX_URL}")
    fi
    docker "${args[@]}" .
  done
}

load_images() {
  local component
  for component in "${COMPONENTS[@]}"; do
    log "loading $(image "${component}") into ${CLUSTER}"
    kind load docker-image --name "${CLUSTER}" "$(image "${component}")"
  done
}

# kind's Pod Security admission refuses any pod that breaks `restricted` in these.
enforce_restricted() {
  local ns
  for ns in "${NAMESPACE}" default; do
    k get namespace "${ns}" >/dev/null 2>&1 || k create namespace "${ns}" >/dev/null
    log "enforcing the restricted Pod Security Standard in ${ns}"
    k label namespace "${ns}" --overwrite pod-security.kubernetes.io/enforce=restricted \
      pod-security.kubernetes.io/enforce-version=latest >/dev/null
  done
}

install_chart() {
  local helm component
  helm="$(bash hack/install-helm.sh)"
  local args=(upgrade --install "${RELEASE}" charts/cascade
    --kube-context "${CONTEXT}" --namespace "${NAMESPACE}" --create-namespace
    --wait --timeout 5m)
  for component in "${COMPONENTS[@]}"; do
    args+=(--set "image.${component}.repository=${REGISTRY}/cascade-${component}"
      --set-string "image.${component}.tag=${TAG}")
  done
  log "installing charts/cascade as ${RELEASE} in ${NAMESPACE}"
  "${helm}" "${args[@]}"
  # helm installs CRDs only on first install; keep them current on reruns.
  k apply -f charts/cascade/crds/ >/dev/null
}

# On a failed run: what a person needs to see, then the original exit status.
on_exit() {
  local rc=$?
  [[ "${rc}" -eq 0 ]] && return
  log "failed (exit ${rc}); cluster state follows (the cluster is kept: e2e/kind.sh down)"
  k get nodes -o wide || true
  k get md,sp,pods,deployments,services -A -o wide || true
  k -n "${NAMESPACE}" logs deployment/"${RELEASE}"-operator --tail=200 || true
  k get events -A --sort-by=.lastTimestamp | tail -40 || true
  exit "${rc}"
}

up() {
  require docker kind kubectl curl
  trap on_exit EXIT
  create_cluster
  fake_gpu_nodes
  build_images
  load_images
  enforce_restricted
  install_chart
  log "applying ${EXAMPLE}"
  k apply -f "${EXAMPLE}"
  log "waiting up to ${TIMEOUT} for condition Available"
  k wait --for=condition=Available -f "${EXAMPLE}" --timeout="${TIMEOUT}"
  trap - EXIT
  k get md
  log "done; delete the cluster with: e2e/kind.sh down"
}

down() {
  command -v kind >/dev/null 2>&1 || die "kind is required"
  kind delete cluster --name "${CLUSTER}"
}

case "${1:-up}" in
  up) up ;;
  down) down ;;
  -h | --help) sed -n '2,/^set -euo/p' "${SELF}" | sed '$d' ;;
  *) die "unknown command: $1 (use up or down)" ;;
esac
