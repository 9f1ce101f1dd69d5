"""`open_store`: a server URL gives a StoreClient with the role's token, anything else a SqlStore."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from backends import LiveServer

import lightningstore
from lightningstore import PermissionDeniedError, SqlStore, StoreClient, open_store
from lightningstore.auth import Role

ROLE_TOKENS = {"LIGHTNINGRL_ADMIN_TOKEN": "adm-env", "LIGHTNINGRL_RUNNER_TOKEN": "run-env"}


@pytest.fixture
def secured_server(tmp_path: Path) -> Iterator[LiveServer]:
    """A real server process whose admin and runner tokens come from its environment."""
    server = LiveServer(tmp_path / "store.db", tmp_path / "server.log", env=ROLE_TOKENS).start()
    yield server
    server.stop()


@pytest.fixture
def client_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """The calling process's role-token variables, as a runner or operator shell would set them."""
    for name, value in ROLE_TOKENS.items():
        monkeypatch.setenv(name, value)
    return monkeypatch


async def test_a_url_reads_the_admin_token_by_default(secured_server, client_env) -> None:
    store = open_store(secured_server.url, max_retries=0)
    try:
        assert isinstance(store, StoreClient)
        assert store.max_retries == 0
        await store.enqueue_rollout({"q": 1})  # only a role allowed to enqueue gets here
    finally:
        await store.close()


async def test_a_runner_reads_the_runner_token(secured_server, client_env) -> None:
    for role in (Role.RUNNER, "runner"):
        store = open_store(secured_server.url, role=role, max_retries=0)
        try:
            assert await store.dequeue_rollout() is None  # the runner may claim
            with pytest.raises(PermissionDeniedError, match="the runner role may not enqueue rollouts"):
                await store.enqueue_rollout({"q": 1})
        finally:
            await store.close()


async def test_an_explicit_token_wins_over_the_environment(secured_server, client_env) -> None:
    store = open_store(secured_server.url, "run-env", max_retries=0)  # role admin, token the runner's
    try:
        with pytest.raises(PermissionDeniedError, match="the runner role may not enqueue rollouts"):
            await store.enqueue_rollout({"q": 1})
    finally:
        await store.close()


async def test_no_role_reads_no_variable(secured_server, client_env) -> None:
    store = open_store(secured_server.url, role=None, max_retries=0)
    try:
        with pytest.raises(PermissionDeniedError, match="missing bearer token"):
            await store.enqueue_rollout({"q": 1})
    finally:
        await store.close()
    client_env.delenv("LIGHTNINGRL_ADMIN_TOKEN")
    store = open_store(secured_server.url, max_retries=0)  # an unset variable: no token either
    try:
        with pytest.raises(PermissionDeniedError, match="missing bearer token"):
            await store.enqueue_rollout({"q": 1})
    finally:
        await store.close()


def test_a_role_without_a_token_variable_is_refused(client_env) -> None:
    with pytest.raises(ValueError, match="the agent role has no token variable"):
        open_store("http://127.0.0.1:9", role=Role.AGENT)


async def test_a_path_opens_a_sql_store(tmp_path: Path, client_env) -> None:
    store = open_store(str(tmp_path / "direct.db"), "ignored", role=Role.RUNNER)
    try:
        assert isinstance(store, SqlStore)
        rollout = await store.enqueue_rollout({"q": 1})  # direct access: no role applies
        assert (await store.get_rollout_by_id(rollout.rollout_id)) is not None
    finally:
        await store.close()


def test_the_package_exports_both_stores_and_open_store() -> None:
    assert {"SqlStore", "StoreClient", "open_store"} <= set(lightningstore.__all__)
    assert lightningstore.StoreClient is StoreClient
