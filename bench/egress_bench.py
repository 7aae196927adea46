"""Benchmark: the hardened outbound client against plain httpx, same loopback TLS server, same run.

    .venv/bin/python bench/egress_bench.py [--requests 300] [--rounds 15]

The server (fakes/upstream.py) runs in its own process on 127.0.0.2:8443 with a `trustme` certificate.
Both clients keep their connection alive between requests (connections reused in both). Rounds alternate between
the clients so drift hits both alike; each round's median per-request latency is compared, and the median of those
ratios is printed. Target: hardened / plain <= 1.10.

Two hardened variants are timed: the client itself (`recorder=None`: URL checks, the guarded backend, deadline
enforcement, bounded decoding), and the client as production runs it, writing one EgressEvent row per call into a
migrated database: a throwaway embedded PostgreSQL (kagent/embedded.py), or `--database-url` (e.g. the machine's
PostgreSQL). That second number is dominated by the durable insert (a commit per call), not by the client.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from env import Processes, django_environment, ready_line, setup_django


def _time_round(call: Callable[[], None], n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        call()
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="requests per client per round")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument(
        "--database-url",
        default="",
        help="where EgressEvent rows go (migrated first); default: a throwaway embedded PostgreSQL",
    )
    args = parser.parse_args()
    from kagent import embedded

    servers = contextlib.nullcontext(None) if args.database_url else embedded.throwaway()
    with tempfile.TemporaryDirectory() as tmp_name, servers as started:
        tmp = Path(tmp_name)
        database_url = args.database_url or started.postgres.url()
        redis_url = os.environ.get("REDIS_URL", "") if args.database_url else started.redis.url()
        from fakes import upstream

        ca_file = upstream.write_certs(tmp / "certs", "tools.test", "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")
        processes = Processes()
        try:
            server = processes.start(
                [sys.executable, "-m", "fakes.upstream", "--cert-dir", str(tmp / "certs")], env=dict(os.environ)
            )
            host = ready_line(server, "the benchmark server")[1]
            setup_django(django_environment(database_url, redis_url, tmp))

            import httpx
            from django.conf import settings

            from kagent.egress import EgressClient, record_in_log

            settings.KAGENT_EGRESS_ALLOW_NETWORKS = [f"{host}/32"]
            settings.KAGENT_EGRESS_CA_BUNDLE = str(ca_file)
            settings.KAGENT_EGRESS_RESOLVE = f"tools.test:8443:{host}"
            url = "https://tools.test:8443/bench?q=1"

            context = ssl.create_default_context(cafile=str(ca_file))
            plain_client = httpx.Client(verify=context, trust_env=False)
            plain_url = f"https://{host}:8443/bench?q=1"
            hardened = EgressClient(recorder=None)
            logged = EgressClient(recorder=record_in_log)
            headers = {"Content-Type": "application/json"}

            def plain() -> None:
                response = plain_client.get(plain_url, headers=headers)
                assert response.status_code == 200 and response.content

            def guarded() -> None:
                response = hardened.request(
                    project_id=None,
                    purpose="bench",
                    method="GET",
                    url=url,
                    headers=headers,
                    body=None,
                    timeout_ms=5000,
                )
                assert response.status == 200 and response.body

            def guarded_logged() -> None:
                response = logged.request(
                    project_id=None,
                    purpose="bench",
                    method="GET",
                    url=url,
                    headers=headers,
                    body=None,
                    timeout_ms=5000,
                )
                assert response.status == 200 and response.body

            for call in (plain, guarded, guarded_logged):  # warm up: connections open, code paths hot
                _time_round(call, 50)

            ratios, ratios_logged = [], []
            all_plain, all_guarded, all_logged = [], [], []
            for _ in range(args.rounds):
                p = _time_round(plain, args.requests)
                g = _time_round(guarded, args.requests)
                lg = _time_round(guarded_logged, args.requests)
                ratios.append(statistics.median(g) / statistics.median(p))
                ratios_logged.append(statistics.median(lg) / statistics.median(p))
                all_plain += p
                all_guarded += g
                all_logged += lg

            def us(values: list[float]) -> str:
                return f"{statistics.median(values) * 1e6:.0f} µs"

            print(f"requests: {args.rounds} rounds x {args.requests} per client, loopback TLS, keep-alive")
            print(f"plain httpx median latency:              {us(all_plain)}")
            print(f"hardened client median latency:          {us(all_guarded)}")
            database = "embedded" if not args.database_url else "given"
            print(f"hardened + EgressEvent row ({database}):{' ' * max(1, 12 - len(database))}{us(all_logged)}")
            print(f"median ratio hardened/plain:             {statistics.median(ratios):.3f}  (target <= 1.10)")
            print(f"median ratio hardened+log/plain:         {statistics.median(ratios_logged):.3f}")
            plain_client.close()
            hardened.close()
            logged.close()
        finally:
            processes.stop_all()


if __name__ == "__main__":
    main()
