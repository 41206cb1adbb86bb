"""Names shared by every component: API group, labels, images, ports.

One place so the operator, the worker, the gateway, the chart and the local cluster
agree on what a Cascade pod looks like.
"""

from typing import Final

GROUP: Final = "cascade.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

MD_KIND: Final = "ModelDeployment"
MD_PLURAL: Final = "modeldeployments"
SP_KIND: Final = "ScalePlan"
SP_PLURAL: Final = "scaleplans"

# Labels on everything the operator creates.
LABEL_NAME: Final = "app.kubernetes.io/name"
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
LABEL_COMPONENT: Final = "app.kubernetes.io/component"
LABEL_DEPLOYMENT: Final = f"{GROUP}/deployment"
MANAGED_BY: Final = "cascade-operator"
COMPONENT_WORKER: Final = "worker"
COMPONENT_GATEWAY: Final = "gateway"
COMPONENT_HOST_COPY: Final = "host-copy"
# The profile Job of spec.materialization (its pod runs the worker with CASCADE_ROLE=materialize).
COMPONENT_MATERIALIZE: Final = "materialize"
# On a profile Job: the hash of the inputs it profiles (a changed spec makes it stale).
LABEL_PROFILE: Final = f"{GROUP}/profile"

# A worker pod's instance role (interactive, mixed or batch: cascade_protocol.roles),
# set by the operator's autoscaler, read by the gateway's routing. Unlabelled: mixed.
LABEL_ROLE: Final = f"{GROUP}/role"

FINALIZER: Final = f"{GROUP}/cleanup"

# Images. The local cluster's node agent maps an image to a console script by the last
# path component of its repository (".../cascade-worker:tag" -> `cascade-worker`).
DEFAULT_TAG: Final = "0.1.0"
# The numeric user and group Cascade's images run as (Dockerfile.*: USER 10001:10001).
POD_USER: Final = 10001
WORKER_IMAGE: Final = f"ghcr.io/cascade-dev/cascade-worker:{DEFAULT_TAG}"
GATEWAY_IMAGE: Final = f"ghcr.io/cascade-dev/cascade-gateway:{DEFAULT_TAG}"
OPERATOR_IMAGE: Final = f"ghcr.io/cascade-dev/cascade-operator:{DEFAULT_TAG}"

# Ports and probe paths (worker and gateway both answer /healthz and /readyz).
WORKER_PORT: Final = 8080
# The worker's data-plane (UCX) listener: weight blocks and, later, activations.
DATA_PORT: Final = 18515
# The worker's pipeline-stage (UCX) listener: activations between the layer ranges of one
# execution pipeline, open while the worker serves as a stage (DATA_PORT is open only
# while a transfer runs, and a stage may serve while its worker receives blocks).
PIPELINE_PORT: Final = 18516
GATEWAY_PORT: Final = 8000
HEALTH_PATH: Final = "/healthz"
READY_PATH: Final = "/readyz"

# Extended resources a GPU node advertises. The RDMA resource a worker requests is not
# fixed: it is the operator's config (chart value rdma.resourceName, none by default);
# this is the name the dev cluster's and kind's simulated GPU nodes advertise.
GPU_RESOURCE: Final = "nvidia.com/gpu"
RDMA_RESOURCE: Final = "rdma/ib"

# Node topology labels: well-known where they exist, Cascade's own for the rest.
LABEL_ZONE: Final = "topology.kubernetes.io/zone"
LABEL_GPU_PRODUCT: Final = "nvidia.com/gpu.product"
LABEL_NVLINK_CLIQUE: Final = "nvidia.com/gpu.clique"
LABEL_LEAF: Final = f"{GROUP}/leaf-switch"
LABEL_NIC_IN_MBIT: Final = f"{GROUP}/nic-in-mbit"
LABEL_NIC_OUT_MBIT: Final = f"{GROUP}/nic-out-mbit"
# The NIC's MTU: the share of its line rate that carries payload (TCP/IPv4 headers take
# 4.2 % of a frame at 1500, 0.7 % at 9000); without it the planner assumes 1500.
LABEL_NIC_MTU: Final = f"{GROUP}/nic-mtu"

# Dev cluster (cgroup v1): the node agent names the node's CPU-quota group's `tasks`
# file here, and a worker's accelerator threads (engine step, pipeline stage compute)
# write their thread ids into it; the rest of the worker runs on the host's cores.
ACCELERATOR_TASKS_ENV: Final = "CASCADE_ACCELERATOR_TASKS"

# A node that plays its GPUs with CPU quotas (the dev cluster's node agent) says so in
# every container's environment: a worker given GPUs there computes on the CPU instead of
# failing its start for want of CUDA (worker engine/device.py). A pod's own env wins.
NODE_EMULATION_ENV: Final = "CASCADE_NODE_EMULATION"
