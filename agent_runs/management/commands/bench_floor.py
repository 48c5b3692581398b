"""Benchmark: the floor of a run's latency, POST → first token and POST → end of stream.

A stripped prototype of the chain every run of this service goes through, with nothing of
the service in it (no Django request, ORM, DRF, RQ, AgentScope or AG-UI objects): how fast
that chain can be on this machine, to compare with what the service does
(docs/benchmarks.md, "The floor of phase a"). Three processes, as in production:

- a server (aiohttp): ``POST /runs`` inserts the run's row in PostgreSQL (committed), pushes
  its id on a Redis list and answers with an SSE stream that follows the run's Redis stream
  (one blocking ``XREAD`` at a time) to its terminal event;
- a worker: pops the id (``BLPOP``), claims the row (``UPDATE``, committed), and makes the
  run's three streamed model calls one after the other on one keep-alive HTTP connection (a
  router call read to its end, the answer's call, a memory call read to its end); each
  event (the start, every network read of the answer's stream as one batch of token events,
  the end) is inserted in PostgreSQL and committed before its ``XADD``: an event is stored
  before any client can see it;
- a client (this process): posts runs one at a time, as the benchmarks' phase ``a`` does,
  and times the first token event and the end of the stream.

The model is any OpenAI-compatible streaming endpoint (``--model-url``; ``bench_provider``
serves one): ``tokens=N`` in the request sets the answer's length there. Uses the database
of ``DATABASE_URL`` (two tables ``bench_floor_*``, dropped at the end) and ``REDIS_URL``.
"""

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

# Keys of this sitting only (run ids start again at 1 with the tables).
_PREFIX = f"bench-floor:{uuid.uuid4().hex[:8]}"
_QUEUE = f"{_PREFIX}:queue"
_TABLES = """
CREATE TABLE IF NOT EXISTS bench_floor_run (
    id bigserial PRIMARY KEY, status text NOT NULL, created timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS bench_floor_event (
    id bigserial PRIMARY KEY, run_id bigint NOT NULL, seq int NOT NULL, payload jsonb NOT NULL);
"""


class Command(BaseCommand):
    help = "Time a stripped prototype of a run's chain: POST → first token, → end of stream."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--model-url", required=True, help="…/v1 of a streaming model")
        parser.add_argument("--runs", type=int, default=15)
        parser.add_argument("--warmup", type=int, default=2)
        parser.add_argument("--tokens", type=int, default=100)
        parser.add_argument("--port", type=int, default=2190)
        parser.add_argument("--role", choices=["client", "server", "worker"], default="client")
        parser.add_argument("--prefix", help=argparse.SUPPRESS)

    def handle(self, *args: Any, **options: Any) -> None:
        global _PREFIX, _QUEUE
        if options["prefix"]:  # a child: the client's keys
            _PREFIX, _QUEUE = options["prefix"], f"{options['prefix']}:queue"
        dsn = _dsn()
        if options["role"] == "server":
            asyncio.run(_serve(dsn, options["port"]))
            return
        if options["role"] == "worker":
            asyncio.run(_work(dsn, options["model_url"]))
            return
        timings = _sitting(dsn, options)
        for label, values in timings.items():
            self.stdout.write(
                f"{label}: median {statistics.median(values):.1f} ms "
                f"(min {min(values):.1f}, max {max(values):.1f}, n={len(values)})"
            )


def _sitting(dsn: str, options: dict[str, Any]) -> dict[str, list[float]]:
    """The tables made, the server and the worker started as children, the client's runs
    timed; then everything of the sitting stopped and dropped."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(_TABLES)
    command = [sys.executable, sys.argv[0], "bench_floor", "--model-url"]
    common = [options["model_url"], "--port", str(options["port"]), "--prefix", _PREFIX]
    children = [
        subprocess.Popen([*command, *common, "--role", role]) for role in ("server", "worker")
    ]
    try:
        return asyncio.run(_client(options))
    finally:
        for child in children:
            child.terminate()
        for child in children:
            child.wait(10)
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute("DROP TABLE bench_floor_run, bench_floor_event")
        import redis

        client: Any = redis.Redis.from_url(settings.REDIS_URL)  # redis-py's sync/async union
        client.delete(*client.keys(f"{_PREFIX}:*") or [_QUEUE])


def _dsn() -> str:
    database = settings.DATABASES["default"]
    if "postgresql" not in database["ENGINE"]:
        raise SystemExit("bench_floor needs PostgreSQL (DATABASE_URL)")
    return (
        f"host={database['HOST'] or '127.0.0.1'} port={database['PORT'] or 5432} "
        f"dbname={database['NAME']} user={database['USER']} password={database['PASSWORD']}"
    )


async def _client(options: dict[str, Any]) -> dict[str, list[float]]:
    import aiohttp

    url = f"http://127.0.0.1:{options['port']}/runs"
    first: list[float] = []
    ended: list[float] = []
    async with aiohttp.ClientSession() as session:
        for _ in range(200):  # the server starting
            try:
                async with session.get(url.replace("/runs", "/ready")) as answer:
                    if answer.status == 200:
                        break
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)  # the worker's connections
        for index in range(options["warmup"] + options["runs"]):
            started = time.perf_counter()
            first_at = None
            async with session.post(url, json={"tokens": options["tokens"]}) as answer:
                async for line in answer.content:
                    if first_at is None and line.startswith(b'data: {"type":"TOKEN"'):
                        first_at = time.perf_counter()
                    if line.startswith(b'data: {"type":"END"'):
                        break
            if index >= options["warmup"] and first_at is not None:
                first.append((first_at - started) * 1000)
                ended.append((time.perf_counter() - started) * 1000)
    return {"POST → first token": first, "POST → end of stream": ended}


async def _serve(dsn: str, port: int) -> None:
    import psycopg
    import redis.asyncio as redis
    from aiohttp import web

    database = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    queue: Any = redis.Redis.from_url(settings.REDIS_URL)
    streams: Any = redis.Redis.from_url(settings.REDIS_URL)

    async def ready(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def runs(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        run_id = await _run_enqueue(database, queue, int(body["tokens"]))
        answer = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await answer.prepare(request)
        await _stream(streams, answer, f"{_PREFIX}:run:{run_id}")
        await answer.write_eof()
        return answer

    app = web.Application()
    app.router.add_get("/ready", ready)
    app.router.add_post("/runs", runs)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    await asyncio.Event().wait()


async def _run_enqueue(database: Any, queue: Any, tokens: int) -> int:
    """The run's row inserted (committed) and its id pushed on the queue."""
    cursor = await database.execute(
        "INSERT INTO bench_floor_run (status) VALUES ('queued') RETURNING id"
    )
    row = await cursor.fetchone()
    assert row is not None
    run_id: int = row[0]
    await queue.lpush(_QUEUE, json.dumps({"run": run_id, "tokens": tokens}))
    return run_id


async def _stream(streams: Any, answer: Any, key: str) -> None:
    """The run's events as SSE frames, each read's at once, to its END event."""
    last = "0-0"
    while True:
        read = await streams.xread({key: last}, block=10_000)
        if not read:
            break
        frames = []
        ended = False
        for _, entries in read:
            for entry_id, fields in entries:
                last = entry_id
                frames.append(b"data: " + fields[b"e"] + b"\n\n")
                ended = ended or fields[b"e"].startswith(b'{"type":"END"')
        await answer.write(b"".join(frames))
        if ended:
            break


async def _work(dsn: str, model_url: str) -> None:
    import psycopg
    import redis.asyncio as redis

    from agent_runs.runtime.provider_transport import provider_session

    database = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    queue: Any = redis.Redis.from_url(settings.REDIS_URL)
    # The service's provider connections (quick acknowledgements: no 40 ms delayed ACK).
    async with provider_session(limit=4) as model:
        while True:
            popped = await queue.blpop([_QUEUE], timeout=0)
            assert popped is not None
            job = json.loads(popped[1])
            await _run(database, queue, model, model_url, job["run"], job["tokens"])


class _Journal:
    """A run's events: each batch stored (one statement, committed), then published."""

    def __init__(self, database: Any, redis: Any, run_id: int) -> None:
        self.database, self.redis, self.run_id = database, redis, run_id
        self.key = f"{_PREFIX}:run:{run_id}"
        self.seq = 0

    async def emit(self, events: list[dict[str, Any]]) -> None:
        payloads = [json.dumps(event, separators=(",", ":")) for event in events]
        await self.database.execute(
            "INSERT INTO bench_floor_event (run_id, seq, payload) "
            "SELECT %s, s, p::jsonb FROM unnest(%s::int[], %s::text[]) AS t(s, p)",
            (self.run_id, list(range(self.seq, self.seq + len(events))), payloads),
        )
        self.seq += len(events)
        async with self.redis.pipeline(transaction=False) as pipe:
            for payload in payloads:
                pipe.xadd(self.key, {"e": payload})
            await pipe.execute()


async def _model_call(model: Any, model_url: str, prompt: str, on_read: Any = None) -> None:
    request = {
        "model": "deepseek-chat",
        "stream": True,
        "messages": [{"role": "user", "content": prompt}],
    }
    async with model.post(f"{model_url}/chat/completions", json=request) as answer:
        async for block in answer.content.iter_any():
            if on_read is not None:
                await on_read(block)


async def _run(
    database: Any, redis: Any, model: Any, model_url: str, run_id: int, tokens: int
) -> None:
    journal = _Journal(database, redis, run_id)
    emit = journal.emit

    async def answer_read(block: bytes) -> None:
        pieces = []
        for line in block.split(b"\n"):
            if line.startswith(b"data: {"):
                delta = json.loads(line[6:])["choices"][0]["delta"]
                if delta.get("content"):
                    pieces.append({"type": "TOKEN", "delta": delta["content"]})
        if pieces:
            await emit(pieces)

    await database.execute(
        "UPDATE bench_floor_run SET status = 'running' WHERE id = %s AND status = 'queued'",
        (run_id,),
    )
    await emit([{"type": "START", "run": run_id}])
    await _model_call(model, model_url, f"route this, tokens=1: {uuid.uuid4()}")
    await _model_call(model, model_url, f"tokens={tokens}", answer_read)
    await _model_call(model, model_url, "remember this, tokens=1")
    await emit([{"type": "END", "run": run_id}])
