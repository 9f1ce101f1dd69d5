"""Egress lock-down for rollout pods: a NetworkPolicy that lets them reach the gateway and DNS, nothing else.

On by default (`JobSpec.egress`): an agent under training that can reach the open network can look
answers up or cause effects its reward never sees (reward hacking). The gateway is the store server,
which also serves the LLM proxy: a store URL with an IP address becomes an `ipBlock`, a Service name
(which a NetworkPolicy cannot name) becomes a selector of the gateway's pods by their labels.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jinja2
import yaml

POLICY_TEMPLATE = Path(__file__).with_name("network_policy.yaml.j2")
DEFAULT_GATEWAY_LABELS = {"app.kubernetes.io/name": "lightningrl-store"}


@dataclass(frozen=True)
class EgressPolicy:
    """Where rollout pods may connect: the gateway (by address or by its pods' labels) and DNS."""

    name: str = "lightningrl-rollout-egress"
    gateway_pod_labels: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_GATEWAY_LABELS))
    """Labels of the store server's pods, used when the store URL names a Service, not an address."""
    gateway_namespace: str | None = None
    """The gateway pods' namespace (None: the rollouts' own)."""
    gateway_cidrs: tuple[str, ...] = ()
    """Addresses of the gateway beyond the store URL's own (a load balancer, a second server)."""
    gateway_port: int | None = None
    """The gateway's port (None: the store URL's, else 4747)."""
    dns: bool = True
    """Allow DNS to kube-dns (UDP and TCP 53), so the gateway's Service name resolves."""


def render_network_policy(
    policy: EgressPolicy, namespace: str, store_url: str | None, *, template: str | Path = POLICY_TEMPLATE
) -> dict[str, Any]:
    """The NetworkPolicy manifest (a dict) for rollout pods in `namespace` talking to `store_url`."""
    host, port = _gateway_address(store_url)
    cidrs = list(policy.gateway_cidrs)
    labels: dict[str, str] = {}
    if host is not None and _is_ip(host):
        cidrs.insert(0, str(ipaddress.ip_network(host)))
    else:
        labels = dict(policy.gateway_pod_labels)
    if not cidrs and not labels:
        raise ValueError(
            "the egress policy allows no gateway: give gateway_pod_labels or gateway_cidrs (or a store URL "
            "with an IP address)"
        )
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)
    text = environment.from_string(Path(template).read_text()).render(
        name=policy.name,
        namespace=namespace,
        gateway_cidrs=cidrs,
        gateway_pod_labels=labels,
        gateway_namespace=policy.gateway_namespace,
        gateway_port=policy.gateway_port or port or 4747,
        dns=policy.dns,
    )
    return yaml.safe_load(text)


def _gateway_address(store_url: str | None) -> tuple[str | None, int | None]:
    if not store_url:
        return None, None
    parts = urlsplit(store_url)
    default = {"http": 80, "https": 443}.get(parts.scheme)
    return parts.hostname, parts.port or default


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
