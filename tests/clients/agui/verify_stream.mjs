// Reads a thread's event stream (GET /api/v1/agent/runs/{threadId}/events) with the official
// AG-UI TypeScript client, unmodified, and says whether the client accepts it.
//
//   node verify_stream.mjs <url> [token]      (or AGUI_STREAM_URL / AGUI_TOKEN)
//
// The events go through the exported pieces of the client's own inbound pipeline, in the
// order AbstractAgent.runAgent applies them after an HttpAgent's run():
//   runHttpRequest            the fetch Response as header and body-chunk events
//   transformHttpEventStream  the client's SSE framing and JSON parsing (parseSSEStream)
//   enforceEvents             the protocol's schemas: unknown fields stripped with a warning
//                             on stderr, a malformed known field fatal
//   transformChunks           *_CHUNK events expanded (none expected here)
//   verifyEvents              the protocol's sequencing rules: RUN_STARTED first, nothing
//                             after a terminal event but a new RUN_STARTED, messages, tool
//                             calls, steps and reasoning opened before they continue and
//                             closed before RUN_FINISHED
// The compatibility shim for retired pre-1.0 shapes is left out (it is not exported as an
// operator and only translates THINKING_* events, which this server does not send).
//
// stdout: one JSON line per event as the client's SSE parser delivered it,
// {"type": ..., "runId": ...}, then {"ok": true} or {"ok": false, "error": "<message>"};
// exit code 0 or 1. stderr: {"connected": <status>} once the response headers are in (a
// caller can wait for it before making the server produce events), then whatever the client
// itself warns about.

import {
  enforceEvents,
  runHttpRequest,
  transformChunks,
  transformHttpEventStream,
  verifyEvents,
} from "@ag-ui/client";
import { tap } from "rxjs";

const url = process.argv[2] ?? process.env.AGUI_STREAM_URL;
const token = process.argv[3] ?? process.env.AGUI_TOKEN;
const timeoutMs = Number(process.env.AGUI_TIMEOUT_MS ?? 30000);

function finish(result) {
  process.stdout.write(JSON.stringify(result) + "\n");
  process.exitCode = result.ok ? 0 : 1;
}

if (!url) {
  process.stderr.write("usage: node verify_stream.mjs <url> [token]\n");
  finish({ ok: false, error: "no URL given" });
} else {
  const abort = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    abort.abort();
  }, timeoutMs);

  const headers = { Accept: "text/event-stream" };
  if (token) headers.Authorization = `Bearer ${token}`;
  const http$ = runHttpRequest(() => fetch(url, { headers, signal: abort.signal })).pipe(
    tap((event) => {
      if (event.type === "headers") {
        process.stderr.write(JSON.stringify({ connected: event.status }) + "\n");
      }
    }),
  );

  transformHttpEventStream(http$)
    .pipe(
      tap((event) => {
        process.stdout.write(JSON.stringify({ type: event.type, runId: event.runId ?? null }) + "\n");
      }),
      enforceEvents(),
      transformChunks(),
      verifyEvents(),
    )
    .subscribe({
      error: (error) => {
        clearTimeout(timer);
        finish({ ok: false, error: error instanceof Error ? error.message : String(error) });
      },
      complete: () => {
        clearTimeout(timer);
        // An abort ends the client's stream with a synthetic RUN_ERROR and completes it,
        // which the verifier accepts: a stream that never ended is reported here instead.
        finish(
          timedOut
            ? { ok: false, error: `the stream did not end within ${timeoutMs} ms` }
            : { ok: true },
        );
      },
    });
}
