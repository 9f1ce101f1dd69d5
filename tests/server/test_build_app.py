"""`build_app`: one assembly of the store server; the proxy and the gate are mounted unless turned off."""

from __future__ import annotations

from typing import cast

import pytest

from lightningstore import LightningStore
from lightningstore.gate import GateRecords
from lightningstore.proxy import Gateway, ProxyConfig
from lightningstore.server import build_app


def paths(app) -> set[str]:
    return set(app.openapi()["paths"])


def test_the_server_mounts_store_proxy_and_gate(sql_store) -> None:
    app = build_app(sql_store, sweep_interval=None)
    assert isinstance(app.state.proxy, Gateway)
    assert app.state.proxy.config == ProxyConfig()
    assert isinstance(app.state.gate, GateRecords)
    mounted = paths(app)
    assert "/v1/rollouts/dequeue" in mounted
    assert any(p.startswith("/proxy/") for p in mounted)
    assert any(p.startswith("/v1/gate/") for p in mounted)


def test_a_proxy_config_is_the_gateways(sql_store) -> None:
    config = ProxyConfig(resource_name="policy", pointer_ttl_s=0.0)
    assert build_app(sql_store, proxy=config, sweep_interval=None).state.proxy.config is config


def test_proxy_and_gate_can_be_left_out(sql_store) -> None:
    app = build_app(sql_store, proxy=False, gate=False, sweep_interval=None)
    assert not hasattr(app.state, "proxy")
    assert not hasattr(app.state, "gate")
    mounted = paths(app)
    assert not any(p.startswith(("/proxy/", "/v1/gate/")) for p in mounted)
    # The store API alone needs no particular store implementation.
    build_app(cast(LightningStore, object()), proxy=False, gate=False, sweep_interval=None).openapi()


def test_the_gate_needs_a_store_it_can_keep_records_beside(sql_store) -> None:
    with pytest.raises(TypeError, match="no gate records for a object"):
        build_app(cast(LightningStore, object()), proxy=False, sweep_interval=None)
