"""The egress NetworkPolicy beside rollout Jobs: gateway and DNS only, on by default, on the generated manifests."""

from __future__ import annotations

import pytest
import yaml

from runner import AgentResources
from runner.controllers.egress import EgressPolicy, render_network_policy
from runner.controllers.kubernetes import JobSpec, render_job

DNS = {
    "to": [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
        }
    ],
    "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
}


def job_pod_labels() -> dict[str, str]:
    resources = AgentResources(rollout_id="ro-1", attempt_id="at-1", mode="train")
    job = render_job(
        JobSpec(image="agent:1", command=["run"]), resources, "task", store_url="http://store:4747"
    )
    return job["spec"]["template"]["metadata"]["labels"]


def selects(selector: dict[str, dict[str, str]], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector["matchLabels"].items())


def test_the_default_policy_allows_only_the_gateway_service_and_dns() -> None:
    spec = JobSpec(image="agent:1", command=["run"], namespace="rl")
    assert spec.egress == EgressPolicy()  # on unless turned off
    policy = render_network_policy(spec.egress, "rl", "http://lightningrl-store.rl.svc:4747")
    assert policy["apiVersion"] == "networking.k8s.io/v1" and policy["kind"] == "NetworkPolicy"
    assert policy["metadata"] == {
        "name": "lightningrl-rollout-egress",
        "namespace": "rl",
        "labels": {"app.kubernetes.io/managed-by": "lightningrl"},
    }
    body = policy["spec"]
    assert selects(body["podSelector"], job_pod_labels())  # it governs exactly the rollout pods
    assert body["policyTypes"] == ["Egress"]  # Egress listed: anything not allowed below is denied
    gateway, dns = body["egress"]
    assert gateway == {
        "to": [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "lightningrl-store"}}}],
        "ports": [{"protocol": "TCP", "port": 4747}],
    }
    assert dns == DNS
    assert "ingress" not in body
    assert yaml.safe_dump(policy)


def test_an_ip_gateway_other_namespace_and_no_dns() -> None:
    policy = render_network_policy(
        EgressPolicy(gateway_namespace="infra", gateway_cidrs=("10.0.0.0/24",), dns=False),
        "rl",
        "https://10.1.2.3/",
    )
    (gateway,) = policy["spec"]["egress"]
    assert gateway == {
        "to": [{"ipBlock": {"cidr": "10.1.2.3/32"}}, {"ipBlock": {"cidr": "10.0.0.0/24"}}],
        "ports": [{"protocol": "TCP", "port": 443}],
    }
    by_name = render_network_policy(EgressPolicy(gateway_namespace="infra"), "rl", "http://store.infra:8080")
    assert by_name["spec"]["egress"][0]["to"] == [
        {
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "lightningrl-store"}},
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "infra"}},
        }
    ]
    assert by_name["spec"]["egress"][0]["ports"] == [{"protocol": "TCP", "port": 8080}]
    with pytest.raises(ValueError, match="allows no gateway"):
        render_network_policy(EgressPolicy(gateway_pod_labels={}), "rl", "http://store:4747")
