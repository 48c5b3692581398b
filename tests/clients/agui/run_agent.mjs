// Holds a conversation with this server through the official AG-UI client's HttpAgent,
// unmodified: one agent, one thread, a turn per entry of the plan, each a runAgent() with the
// whole conversation as the client keeps it (its own pipeline applies the protocol's
// schemas and verifyEvents to every stream it reads).
//
//   node run_agent.mjs <url> <token> '<plan JSON>'
//
// plan: {"threadId": "...", "turns": [{"id": "u1", "text": "...", "runId": "r1",
//        "abortOn": {"type": "STEP_STARTED", "stepName": "worker"}}, ...]}
// A turn with "abortOn" calls abortRun() when the first event matching it arrives (the only
// stop HttpAgent has: it aborts the request); one with "waitMs" waits that long first.
//
// stdout: one JSON line per turn, {"turn", "runId", "ok", "error"?, "abortedAt"? (epoch ms),
// "events": [{"type", "messageId"?, "metadata"?, "outcome"?, "protocolVersion"?, "usage"?}],
// "newMessages"}, then {"messages": [...]} (what the
// client holds at the end). stderr: the client's own warnings.

import { HttpAgent } from "@ag-ui/client";

const [url, token, planJson] = process.argv.slice(2);
const plan = JSON.parse(planJson);
const write = (line) => process.stdout.write(JSON.stringify(line) + "\n");

const agent = new HttpAgent({
  url,
  headers: { Authorization: `Bearer ${token}` },
  threadId: plan.threadId,
});

const matches = (event, pattern) =>
  Object.entries(pattern).every(([key, value]) => event[key] === value);

for (const [index, turn] of plan.turns.entries()) {
  if (turn.waitMs) await new Promise((resolve) => setTimeout(resolve, turn.waitMs));
  agent.addMessage({ id: turn.id, role: "user", content: turn.text });
  const events = [];
  let abortedAt = null;
  const subscriber = {
    onEvent: ({ event }) => {
      const kept = { type: event.type };
      for (const key of ["messageId", "metadata", "outcome", "protocolVersion", "usage"]) if (event[key] !== undefined) kept[key] = event[key];
      events.push(kept);
      if (turn.abortOn && abortedAt === null && matches(event, turn.abortOn)) {
        abortedAt = Date.now();
        agent.abortRun();
      }
    },
  };
  try {
    const { newMessages } = await agent.runAgent({ runId: turn.runId }, subscriber);
    write({ turn: index, runId: turn.runId, ok: true, abortedAt, events, newMessages });
  } catch (error) {
    write({
      turn: index,
      runId: turn.runId,
      ok: false,
      error: error instanceof Error ? error.message : String(error),
      abortedAt,
      events,
    });
  }
}
write({ messages: agent.messages });
