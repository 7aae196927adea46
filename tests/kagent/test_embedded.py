"""The embedded PostgreSQL and Redis (kagent/embedded.py) that `bin/run` starts on a machine with neither: on unix
sockets only, in folders of mode 0700, PostgreSQL as an unprivileged account when we are root, the data kept from one
start to the next, and errors a person can act on. (Every other test of the suite runs on such servers when
DATABASE_URL / REDIS_URL are unset: tests/plugins/services.py.)"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import redis

from kagent import embedded


@pytest.fixture
def var() -> Iterator[Path]:
    # Not pytest's tmp_path: its parents are private to root, and PostgreSQL's account must be able to search ours,
    # as it can bin/run's var/ in a checkout.
    parent = Path(tempfile.mkdtemp(prefix="kagent-embedded-test-"))
    parent.chmod(0o711)
    folder = parent / "var"
    folder.mkdir(mode=0o711)
    yield folder
    shutil.rmtree(parent, ignore_errors=True)


def test_the_data_is_kept_from_one_start_to_the_next_and_nothing_listens_on_tcp(var, monkeypatch):
    monkeypatch.chdir(var.parent)
    services = embedded.Services.under(Path("var"))  # relative, as bin/run gives it: the servers run from elsewhere
    services.start()
    try:
        with psycopg.connect(services.postgres.url(), autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (note text)")
            conn.execute("INSERT INTO kept VALUES ('still here')")
            assert conn.execute("SHOW listen_addresses").fetchone() == ("",)
            assert conn.execute("SELECT current_setting('server_version_num')::int / 10000").fetchone() == (18,)
        client = redis.Redis.from_url(services.redis.url())
        client.set("queued", "a task")
        assert client.config_get("port") == {"port": "0"}
        client.close()
        assert services.postgres.start() is False and services.redis.start() is False  # running: left alone
    finally:
        services.stop()
    assert not services.postgres.running() and not services.redis.ping()

    services.start()
    try:
        with psycopg.connect(services.postgres.url()) as conn:
            assert conn.execute("SELECT note FROM kept").fetchall() == [("still here",)]
        client = redis.Redis.from_url(services.redis.url())
        assert client.get("queued") == b"a task"  # saved when it stopped
        client.close()
    finally:
        services.stop()


def test_the_folders_are_private_and_postgres_never_runs_as_root(var):
    services = embedded.Services.under(var)
    services.start()
    try:
        for folder in (services.postgres.folder, services.redis.folder):
            assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        owner = pwd.getpwuid(services.postgres.folder.stat().st_uid).pw_name
        with psycopg.connect(services.postgres.url()) as conn:
            pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
            server_uid = os.stat(f"/proc/{pid}").st_uid  # the server process serving us
        if os.geteuid() == 0:
            assert owner == embedded.UNPRIVILEGED and server_uid == pwd.getpwnam(embedded.UNPRIVILEGED).pw_uid
        else:
            assert server_uid == os.geteuid()
    finally:
        services.stop()


def test_a_folder_that_is_no_cluster_is_not_touched(var):
    folder = var / "postgres"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(embedded.EmbeddedError, match="holds no PostgreSQL cluster"):
        embedded.Postgres(folder).start()
    assert (folder / "notes.txt").read_text() == "mine"


def test_a_path_too_long_for_a_socket_says_what_to_do(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    with pytest.raises(embedded.EmbeddedError, match="KAGENT_VAR_DIR"):
        embedded.Redis(deep / "redis").start()
    assert not deep.exists()
