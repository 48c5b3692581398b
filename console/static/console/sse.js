// Reading a thread's event stream with fetch() rather than EventSource, so that the page
// sends Last-Event-ID itself and decides how to reconnect (docs/console.md, "The stream").

/** A server-sent events parser: feed it text as it arrives; it calls onFrame({id, event,
 * data}) for each complete frame. Comments (": keep-alive") and retry lines are skipped. */
export function sseParser(onFrame) {
  let buffer = "";
  let frame = { id: null, event: "", data: [] };
  function line(text) {
    if (text === "") {
      if (frame.data.length) {
        onFrame({ id: frame.id, event: frame.event || "message", data: frame.data.join("\n") });
      }
      frame = { id: null, event: "", data: [] };
      return;
    }
    if (text.startsWith(":")) return;
    const colon = text.indexOf(":");
    const field = colon === -1 ? text : text.slice(0, colon);
    let value = colon === -1 ? "" : text.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") frame.data.push(value);
    else if (field === "event") frame.event = value;
    else if (field === "id") frame.id = value;
  }
  return function feed(chunk) {
    buffer += chunk;
    // A "\r" at the very end may be the first half of "\r\n": keep it for the next chunk.
    const parts = buffer.split(/\r\n|\n|\r(?!$)/);
    buffer = parts.pop();
    parts.forEach(line);
  };
}

export class StreamRefused extends Error {
  constructor(status, detail) {
    super(detail || `the event stream answered ${status}`);
    this.status = status;
  }
}

const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);

function pause(ms, signal) {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      window.removeEventListener("online", done);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    // Back online: try again now rather than at the end of the back-off.
    window.addEventListener("online", done);
    signal.addEventListener("abort", done);
  });
}

/** Follow one run's events until its RUN_FINISHED or RUN_ERROR.
 *
 * `lastId` is the id of the last event already rendered (null: start at the run's
 * RUN_STARTED). Every event is handed to onEvent(event, id) once: a frame whose id is not
 * above the last one handed over is dropped, so a reconnect never doubles text. When the
 * connection drops, it reconnects with back-off (0.5 s doubling to 8 s, at once when the
 * browser comes back online) sending `Last-Event-ID`. onState("live" | "reconnecting")
 * reports the connection. Resolves when the run has ended or `signal` aborts; rejects with
 * StreamRefused when the server refuses the stream (signed out, not found). */
export async function followRun({ api, threadId, runId, lastId = null, onEvent, onState, signal }) {
  let cursor = lastId;
  let failures = 0;
  const url = `${api}/runs/${encodeURIComponent(threadId)}/events?runId=${encodeURIComponent(runId)}`;
  while (!signal.aborted) {
    let ended = false;
    try {
      const headers = { Accept: "text/event-stream" };
      if (cursor !== null) headers["Last-Event-ID"] = String(cursor);
      const response = await fetch(url, { headers, signal, credentials: "same-origin", cache: "no-store" });
      if (!response.ok) {
        let detail = "";
        try {
          detail = (await response.json()).detail;
        } catch {
          /* not JSON: the status says enough */
        }
        if (response.status >= 400 && response.status < 500) throw new StreamRefused(response.status, detail);
        throw new Error(detail || `the event stream answered ${response.status}`);
      }
      onState?.("live");
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      const feed = sseParser((frame) => {
        if (ended || frame.id === null || !/^\d+$/.test(frame.id)) return;
        const id = Number(frame.id);
        if (cursor !== null && id <= cursor) return;
        cursor = id;
        failures = 0;
        const event = JSON.parse(frame.data);
        onEvent(event, id);
        if (TERMINAL.has(event.type) && event.runId === runId) ended = true;
      });
      while (!ended) {
        const { value, done } = await reader.read();
        if (done) break;
        feed(value);
      }
      if (ended) {
        reader.cancel().catch(() => {});
        return;
      }
    } catch (error) {
      if (signal.aborted) return;
      if (error instanceof StreamRefused) throw error;
    }
    // The connection closed before the run's end: a drop. Resume from the cursor.
    failures += 1;
    onState?.("reconnecting");
    await pause(Math.min(500 * 2 ** (failures - 1), 8000), signal);
  }
}
