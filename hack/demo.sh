#!/usr/bin/env bash
# The main job on the local cluster: cluster up, chart installed, a sample
# ModelDeployment applied, and its worker pods running on simulated GPU nodes.
set -euo pipefail
cd "$(dirname "$0")/.."
NODES="${1:-4}"
EXAMPLE="${2:-examples/01-minimal}"
PATH="$PWD/.venv/bin:$PATH"

cascade dev up --nodes "$NODES"
KUBECONFIG="$(cascade dev kubeconfig)"
export KUBECONFIG
HELM="$(bash hack/install-helm.sh)"

"$HELM" upgrade --install cascade charts/cascade \
  --namespace cascade-system --create-namespace --wait --timeout 5m
kubectl apply -f "$EXAMPLE"
kubectl wait modeldeployments --all --for=condition=Available --timeout=300s
echo
kubectl get nodes -L nvidia.com/gpu.product,cascade.dev/leaf-switch
echo
kubectl get pods -A -o wide
echo
kubectl get md
echo
echo "Cluster is up. export KUBECONFIG=$KUBECONFIG   (tear down: make down)"
