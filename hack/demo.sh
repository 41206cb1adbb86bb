#!/usr/bin/env bash
# The main job on the local cluster: cluster up, chart installed, a sample
# ModelDeployment applied, and its worker pods running on simulated GPU nodes.
set -euo pipefail
cd "$(dirname "$0")/.."
NODES="${1:-4}"
EXAMPLE="${2:-examples/01-minimal}"
PATH="$PWD/.venv/bin:$PATH"

# The checkpoint the example manifests name (workers load it at start).
cascade model init /var/lib/cascade/models/tiny-llama --if-missing
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
# One request through the OpenAI-compatible gateway of the first ModelDeployment.
MD="$(kubectl get md -A -o jsonpath='{.items[0].metadata.namespace}/{.items[0].metadata.name}')"
GATEWAY="$(cascade dev url "${MD%/*}/${MD#*/}-gateway")"
echo "POST $GATEWAY/v1/chat/completions"
curl -sS "$GATEWAY/v1/chat/completions" -H 'Content-Type: application/json' \
  -d "{\"model\": \"${MD#*/}\", \"max_tokens\": 16, \"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}]}"
echo
echo
echo "Cluster is up. export KUBECONFIG=$KUBECONFIG   (tear down: make down)"
echo "OpenAI base URL: $GATEWAY/v1"
