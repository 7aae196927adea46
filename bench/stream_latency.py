"""Streamed answers: how long after the model has written a sentence the customer has it, one command.

    .venv/bin/python bench/stream_latency.py                 # 20 runs, a word every 50 ms
    .venv/bin/python bench/stream_latency.py --runs 50 --chunk-delay-ms 30

The real stack of bench/stack.py (gunicorn, a Celery worker started as docker-compose.yml's, PostgreSQL and Redis:
`--database-url`/`--redis-url`, or throwaway embedded servers), with the scripted model in THIS process
(fakes/llm.py), streaming a three-sentence answer a word every `--chunk-delay-ms` and noting when it wrote each
event. The app (httpx, this process) starts each run with `"stream": true` and notes when each `run.output.delta`
arrives. Printed, over the runs (median, p95, max):
- first sentence: from the model writing the piece that completes the first sentence for the truthfulness guard
  (the next word, with the space before it: a sentence is released once it is known to have ended) to the app
  receiving it; and from the sentence's last word (the full wait a reader has, one inter-word time more);
- each later delta likewise, and the run's end: from the model's last event to `run.completed`.
Target: first sentence to the customer ≤ 100 ms. Nothing asserts a time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from env import ROOT, servers, setup_django_fresh
from load import make_project
from stack import Stack

ANSWER = "Thanks for waiting. Your boots left our warehouse in Leeds on Monday. They should arrive by Thursday."
SCRIPT = "stream-latency"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def describe(values: list[float]) -> str:
    if not values:
        return "no data"
    ms = [v * 1000 for v in values]
    return f"median {statistics.median(ms):6.1f} ms   p95 {percentile(ms, 0.95):6.1f} ms   max {max(ms):6.1f} ms"


def piece_of(event: bytes) -> str:
    """The answer's text a streamed Chat Completions event carries, if any."""
    for line in event.decode().splitlines():
        if line.startswith("data: {"):
            with contextlib.suppress(ValueError, KeyError, IndexError, TypeError):
                return str(json.loads(line[6:])["choices"][0]["delta"].get("content") or "")
    return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--chunk-delay-ms", type=float, default=50.0)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--redis-url", default="")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp_name,
        servers(args.database_url, args.redis_url, "kagent_bench_stream") as (database_url, redis_url),
    ):
        tmp = Path(tmp_name)
        setup_django_fresh(database_url, redis_url, tmp)
        from fakes.llm import FakeLLM, text

        fake = FakeLLM(record=False, chunk_delay_s=args.chunk_delay_ms / 1000).start()
        fake.script(SCRIPT, [text(ANSWER)])
        fake.stream_log = []
        stack = Stack(
            database_url=database_url,
            redis_url=redis_url,
            tmp=tmp,
            log_dir=ROOT / "var" / "bench-stream",
            scripts={},
            llm_base=fake.base_url,
        )
        try:
            stack.start()
            _measure(args, stack, fake)
        finally:
            stack.stop()
            fake.stop()


def _measure(args: argparse.Namespace, stack: Stack, fake: Any) -> None:
    import httpx

    _, key = make_project("stream")
    headers = {"Authorization": f"Bearer {key}", "Accept": "text/event-stream"}
    config = {"model": {"provider": "openai_compatible", "name": f"script:{SCRIPT}"}}
    with httpx.Client(base_url=stack.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=30) as api:
        agent = api.post("/v1/agents", json={"name": "stream", "config": config}).json()["id"]
        api.post(f"/v1/agents/{agent}/publish", json={})
    first_released, first_written, later, ends = [], [], [], []
    with httpx.Client(base_url=stack.base_url, timeout=60) as app:
        for attempt in range(args.runs + 1):  # the first is a warm-up
            fake.stream_log.clear()
            deltas: list[tuple[float, str]] = []
            completed_at = None
            body = {"agent": agent, "input": "Where are my boots?", "stream": True}
            with app.stream("POST", "/v1/runs", json=body, headers=headers) as response:
                event, buffer = "", ""
                for chunk in response.iter_text():
                    buffer += chunk
                    while "\n\n" in buffer:
                        block, buffer = buffer.split("\n\n", 1)
                        now = time.time()
                        for line in block.splitlines():
                            if line.startswith("event: "):
                                event = line[7:]
                            elif line.startswith("data: ") and event == "run.output.delta":
                                deltas.append((now, json.loads(line[6:])["delta"]))
                            elif line.startswith("data: ") and event == "run.completed":
                                completed_at = now
                    if completed_at is not None:
                        break
            written = [(at, piece_of(data)) for at, data in fake.stream_log]
            written = [(at, piece) for at, piece in written if piece]
            if attempt == 0 or not deltas or completed_at is None:
                continue
            # The piece whose arrival let the guard release each delta: the first piece written after the delta's
            # text was complete (the next word); and the delta's own last word.
            text_so_far, done_at = "", []
            for at, piece in written:
                text_so_far += piece
                done_at.append((len(text_so_far.strip()), at))
            shown = ""
            for index, (received, delta) in enumerate(deltas):
                shown += delta
                ends_at = len(shown.strip())
                last_word = next(at for length, at in done_at if length >= ends_at)
                following = [at for length, at in done_at if length > ends_at]
                releaser = following[0] if following else written[-1][0]
                if index == 0:
                    first_released.append(received - releaser)
                    first_written.append(received - last_word)
                else:
                    later.append(received - releaser)
            ends.append(completed_at - written[-1][0])
    print(f"{args.runs} runs, a word every {args.chunk_delay_ms:.0f} ms, through gunicorn and a threaded worker")
    print(f"first sentence, from the piece that completes it to the app:  {describe(first_released)}")
    print(f"first sentence, from its last word to the app:               {describe(first_written)}")
    print(f"later sentences, from the piece that completes them:          {describe(later)}")
    print(f"the end, from the model's last event to run.completed:         {describe(ends)}")


if __name__ == "__main__":
    main()
