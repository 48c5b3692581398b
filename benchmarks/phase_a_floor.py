"""A stripped run server: the hops a run of this project takes to its first token and its end,
with none of its framework, to measure how close to the peers a server that keeps the same
guarantees can get on this machine (phase a; docs/benchmarks.md, "the floor of phase a").

What it keeps of the project's run: the POST stores the run (a committed row) and queues it in
Redis, then answers 202; a worker process (a separate process, as ours) takes it from the queue,
claims it and writes RUN_STARTED and the router's STEP_STARTED in one transaction, calls the
router model (an OpenAI-compatible streamed call), writes the boundary (the router's step end,
the worker's start) in one transaction and its usage in a statement of its own, streams the
worker model's tokens as events each written to PostgreSQL (batched while a write is in
flight) before they go to Redis, calls the memory model, and ends the run with RUN_FINISHED and
its status in one transaction. The client's SSE stream reads the thread's stored events, then
follows the thread's Redis stream from where that read ended. Every event is in PostgreSQL
before it is in Redis.

What it drops: Django, DRF, the ORM, RQ's bookkeeping, AgentScope, pydantic events, auth,
steps' rows, tracing, metrics, the sweeper, validation.

From the repository's root (it uses the project's provider session, nothing else of it):

    python benchmarks/phase_a_floor.py server --port 2300 --db postgres://... --redis redis://.../5
    python benchmarks/phase_a_floor.py worker --db ... --redis ... --model-url http://127.0.0.1:9111/v1
    python benchmarks/phase_a_floor.py client --url http://127.0.0.1:2300 --runs 30 --tokens 100

``--trace`` on the worker prints each run's timeline to its first token.
"""

import argparse
import asyncio
import json
import statistics
import time
import uuid
from typing import Any

import aiohttp
import psycopg
import redis.asyncio as aioredis
from aiohttp import web

# The project's provider session (aiohttp, quick acknowledgements): the same model client.
from agent_runs.runtime.provider_transport import provider_session

SCHEMA = """
CREATE TABLE IF NOT EXISTS floor_runs (
    id bigserial PRIMARY KEY, thread_id uuid NOT NULL, status text NOT NULL,
    claim uuid, input jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS floor_events (
    id bigserial PRIMARY KEY, thread_id uuid NOT NULL, run_id bigint NOT NULL,
    seq integer NOT NULL, type text NOT NULL, payload jsonb NOT NULL,
    UNIQUE (run_id, seq));
CREATE INDEX IF NOT EXISTS floor_events_thread ON floor_events (thread_id, id);
CREATE TABLE IF NOT EXISTS floor_usage (
    id bigserial PRIMARY KEY, run_id bigint NOT NULL, stage text NOT NULL, usage jsonb NOT NULL);
"""
QUEUE = "floor:queue"
ROUTE_TOOL = {
    "type": "function",
    "function": {
        "name": "generate_structured_output",
        "parameters": {
            "type": "object",
            "properties": {"route": {"type": "string"}, "tools": {"type": "array"}},
        },
    },
}
MEMORY_TOOL = {"type": "function", "function": {"name": "memory_remember", "parameters": {}}}


def sse(event_id: int, kind: str, payload: str) -> bytes:
    return f"id: {event_id}\nevent: {kind}\ndata: {payload}\n\n".encode()


# ----------------------------------------------------------------- server
async def server(args: argparse.Namespace) -> None:
    db = await psycopg.AsyncConnection.connect(args.db, autocommit=True)
    await db.execute(SCHEMA)
    pool: asyncio.Queue[psycopg.AsyncConnection[Any]] = asyncio.Queue()
    for _ in range(4):
        pool.put_nowait(await psycopg.AsyncConnection.connect(args.db, autocommit=True))
    r: Any = aioredis.from_url(args.redis)

    async def post_run(request: web.Request) -> web.Response:
        body = await request.json()
        conn = await pool.get()
        try:
            cur = await conn.execute(
                "INSERT INTO floor_runs (thread_id, status, input) VALUES (%s, 'queued', %s) "
                "RETURNING id",
                (body["threadId"], json.dumps(body)),
            )
            row = await cur.fetchone()
        finally:
            pool.put_nowait(conn)
        assert row is not None
        await r.lpush(QUEUE, row[0])
        return web.json_response({"runId": row[0], "threadId": body["threadId"]}, status=202)

    async def events(request: web.Request) -> web.StreamResponse:
        thread = request.match_info["thread"]
        key = f"floor:t:{thread}"
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        # Where the thread's Redis stream is now, then what is stored: nothing falls between.
        last = await r.xrevrange(key, count=1)
        cursor = last[0][0] if last else b"0-0"
        conn = await pool.get()
        try:
            cur = await conn.execute(
                "SELECT id, type, payload::text FROM floor_events WHERE thread_id = %s ORDER BY id",
                (thread,),
            )
            rows = await cur.fetchall()
        finally:
            pool.put_nowait(conn)
        seen = 0
        for event_id, kind, payload in rows:
            await response.write(sse(event_id, kind, payload))
            seen = event_id
            if kind == "RUN_FINISHED":
                return response
        while True:
            got = await r.xread({key: cursor}, block=30000)
            if not got:
                return response
            for entry_id, fields in got[0][1]:
                cursor = entry_id
                event_id = int(fields[b"id"])
                if event_id <= seen:
                    continue
                await response.write(sse(event_id, fields[b"t"].decode(), fields[b"p"].decode()))
                seen = event_id
                if fields[b"t"] == b"RUN_FINISHED":
                    return response

    app = web.Application()
    # The paths of this project's AG-UI runs, so the peers' benchmark client measures it as
    # it measures the project.
    app.router.add_post("/api/v1/agent/runs", post_run)
    app.router.add_get("/api/v1/agent/runs/{thread}/events", events)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", args.port).start()
    print(f"floor server on {args.port}", flush=True)
    await asyncio.Event().wait()


# ----------------------------------------------------------------- worker
class Timeline:
    """With ``--trace``, when each step of a run's way to its first token ended, in ms from
    its dequeue (printed once the first token is published)."""

    def __init__(self, on: bool):
        self.on = on
        self.marks: list[tuple[str, float]] = []

    def mark(self, name: str) -> None:
        if self.on and not any(mark == name for mark, _ in self.marks):
            self.marks.append((name, time.monotonic()))
            if name == "first token published":
                base = self.marks[0][1]
                print(" ".join(f"{n}={1000 * (t - base):.1f}" for n, t in self.marks), flush=True)


class Journal:
    """A run's events: written to PostgreSQL in order (what comes while a write is in flight
    goes in the next one), then to the thread's Redis stream."""

    def __init__(
        self,
        conn: "psycopg.AsyncConnection[Any]",
        r: Any,
        run_id: int,
        thread: str,
        timeline: Timeline,
    ):
        self.conn, self.r, self.run_id, self.thread = conn, r, run_id, thread
        self.timeline = timeline
        self.seq = 0
        self.published: list[tuple[int, tuple[int, str, str]]] = []
        self.pending: list[tuple[int, str, str]] = []
        self.writing: asyncio.Task[None] | None = None

    def event(self, kind: str, **fields: Any) -> tuple[int, str, str]:
        self.seq += 1
        payload = json.dumps({"type": kind, "threadId": self.thread, **fields})
        return self.seq, kind, payload

    async def insert(self, events: list[tuple[int, str, str]]) -> None:
        """The events inserted (in the caller's transaction, when it has one)."""
        cur = await self.conn.execute(
            "INSERT INTO floor_events (thread_id, run_id, seq, type, payload) "
            "SELECT %s, %s, s, t, p::jsonb FROM unnest(%s::int[], %s::text[], %s::text[]) "
            "AS v(s, t, p) RETURNING id",
            (
                self.thread,
                self.run_id,
                [e[0] for e in events],
                [e[1] for e in events],
                [e[2] for e in events],
            ),
        )
        ids = [row[0] for row in await cur.fetchall()]
        self.published = list(zip(ids, events, strict=True))

    async def publish(self) -> None:
        async with self.r.pipeline(transaction=False) as pipe:
            for event_id, (_, kind, payload) in self.published:
                pipe.xadd(f"floor:t:{self.thread}", {"id": event_id, "t": kind, "p": payload})
            await pipe.execute()
        if any(kind == "TEXT_MESSAGE_CONTENT" for _, (_, kind, _) in self.published):
            self.timeline.mark("first token published")

    def emit(self, kind: str, **fields: Any) -> None:
        self.pending.append(self.event(kind, **fields))
        if self.writing is None or self.writing.done():
            self.writing = asyncio.ensure_future(self._drain())

    async def _drain(self) -> None:
        while self.pending:
            batch, self.pending = self.pending, []
            await self.insert(batch)  # autocommit: one statement, committed
            await self.publish()

    async def flush(self) -> None:
        while self.writing is not None and not self.writing.done():
            await self.writing

    async def transaction(self, kinds: list[tuple[str, dict[str, Any]]], *extra: str) -> None:
        """Events written with other statements in one transaction, then published."""
        await self.flush()
        async with self.conn.transaction():
            for statement in extra:
                await self.conn.execute(statement, (self.run_id,))
            await self.insert([self.event(kind, **fields) for kind, fields in kinds])
        await self.publish()


async def model_call(
    http: aiohttp.ClientSession, url: str, text: str, tools: list[Any], on_text: Any = None
) -> tuple[str, dict[str, Any]]:
    body = {
        "model": "deepseek-chat",
        "stream": True,
        "messages": [{"role": "system", "content": "floor"}, {"role": "user", "content": text}],
    }
    if tools:
        body["tools"] = tools
    out: list[str] = []
    usage: dict[str, Any] = {}
    async with http.post(f"{url}/chat/completions", json=body) as response:
        buffer = b""
        async for data in response.content.iter_any():
            buffer += data
            while b"\n\n" in buffer:
                line, buffer = buffer.split(b"\n\n", 1)
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                usage = chunk.get("usage") or usage
                for choice in chunk["choices"]:
                    delta = choice["delta"]
                    piece = delta.get("content") or "".join(
                        call["function"].get("arguments", "")
                        for call in delta.get("tool_calls") or []
                        if "function" in call
                    )
                    if piece:
                        out.append(piece)
                        if on_text is not None:
                            on_text(piece)
                            # A turn of the loop: the journal's write goes out now, not after
                            # the rest of a buffered answer.
                            await asyncio.sleep(0)
    return "".join(out), usage


async def run_one(
    run_id: int,
    r: Any,
    http: aiohttp.ClientSession,
    url: str,
    conns: "asyncio.Queue[psycopg.AsyncConnection[Any]]",
    timeline: Timeline,
) -> None:
    timeline.mark("dequeued")
    conn = await conns.get()
    try:
        async with conn.transaction():
            cur = await conn.execute(
                "UPDATE floor_runs SET status = 'running', claim = %s WHERE id = %s "
                "AND status = 'queued' RETURNING thread_id, input",
                (uuid.uuid4(), run_id),
            )
            row = await cur.fetchone()
            if row is None:
                return
            thread, body = str(row[0]), row[1]
            journal = Journal(conn, r, run_id, thread, timeline)
            await journal.insert(
                [journal.event("RUN_STARTED"), journal.event("STEP_STARTED", stepName="router")]
            )
        await journal.publish()
        timeline.mark("started")
        text = body["messages"][0]["content"]
        decision, usage = await model_call(http, url, text, [ROUTE_TOOL])
        json.loads(decision)
        timeline.mark("routed")
        await usage_record(conn, run_id, "router", usage)
        await journal.transaction(
            [("STEP_FINISHED", {"stepName": "router"}), ("STEP_STARTED", {"stepName": "worker"})]
        )
        timeline.mark("boundary")
        message = f"worker-{run_id}"
        journal.emit("TEXT_MESSAGE_START", messageId=message, role="assistant")

        def on_text(piece: str) -> None:
            timeline.mark("first chunk")
            journal.emit("TEXT_MESSAGE_CONTENT", messageId=message, delta=piece)

        answer, usage = await model_call(http, url, text, [], on_text=on_text)
        journal.emit("TEXT_MESSAGE_END", messageId=message)
        await usage_record(conn, run_id, "worker", usage)
        await journal.transaction(
            [("STEP_FINISHED", {"stepName": "worker"}), ("STEP_STARTED", {"stepName": "memory"})]
        )
        _, usage = await model_call(http, url, answer, [MEMORY_TOOL])
        await usage_record(conn, run_id, "memory", usage)
        await journal.transaction(
            [("STEP_FINISHED", {"stepName": "memory"}), ("RUN_FINISHED", {})],
            "UPDATE floor_runs SET status = 'completed' WHERE id = %s",
        )
    finally:
        conns.put_nowait(conn)


async def usage_record(
    conn: "psycopg.AsyncConnection[Any]", run_id: int, stage: str, usage: dict[str, Any]
) -> None:
    """A model call's usage, a statement committed on its own (as the project's)."""
    await conn.execute(
        "INSERT INTO floor_usage (run_id, stage, usage) VALUES (%s, %s, %s)",
        (run_id, stage, json.dumps(usage)),
    )


async def worker(args: argparse.Namespace) -> None:
    r: Any = aioredis.from_url(args.redis)
    queue_r: Any = aioredis.from_url(args.redis)
    conns: asyncio.Queue[psycopg.AsyncConnection[Any]] = asyncio.Queue()
    for _ in range(4):
        conns.put_nowait(await psycopg.AsyncConnection.connect(args.db, autocommit=True))
    http = provider_session(limit=100)
    print("floor worker up", flush=True)
    tasks: set[asyncio.Task[None]] = set()
    while True:
        got = await queue_r.brpop([QUEUE], timeout=0)
        run = run_one(int(got[1]), r, http, args.model_url, conns, Timeline(args.trace))
        task = asyncio.ensure_future(run)
        tasks.add(task)
        task.add_done_callback(tasks.discard)


# ----------------------------------------------------------------- client
async def client(args: argparse.Namespace) -> None:
    async with aiohttp.ClientSession(base_url=args.url) as http:
        first: list[float] = []
        end: list[float] = []
        for i in range(args.warmup + args.runs):
            thread = str(uuid.uuid4())
            body = {
                "threadId": thread,
                "messages": [{"role": "user", "content": f"tokens={args.tokens} tool=0"}],
            }
            t0 = time.perf_counter()
            async with http.post("/api/v1/agent/runs", json=body) as response:
                assert response.status == 202, await response.text()
            first_token = None
            async with http.get(f"/api/v1/agent/runs/{thread}/events") as response:
                async for line in response.content:
                    if first_token is None and b"TEXT_MESSAGE_CONTENT" in line:
                        first_token = time.perf_counter() - t0
            if i >= args.warmup:
                assert first_token is not None
                first.append(first_token * 1000)
                end.append((time.perf_counter() - t0) * 1000)
        print(
            f"floor: first token median {statistics.median(first):.1f} ms, "
            f"end of stream median {statistics.median(end):.1f} ms (n={len(first)})"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["server", "worker", "client"])
    parser.add_argument("--port", type=int, default=2300)
    parser.add_argument("--db", default="postgres://root@127.0.0.1:5432/floor")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/5")
    parser.add_argument("--model-url", default="http://127.0.0.1:9111/v1")
    parser.add_argument("--url", default="http://127.0.0.1:2300")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=100)
    parser.add_argument("--trace", action="store_true", help="worker: each run's timeline")
    args = parser.parse_args()
    role = {"server": server, "worker": worker, "client": client}[args.role]
    asyncio.run(role(args))


if __name__ == "__main__":
    main()
