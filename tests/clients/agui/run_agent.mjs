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
// "tools": the client's own tools, offered on that run (RunAgentInput.tools). A turn with no
// "text" adds no user message: with "toolResults" ({toolName: result}) it answers the client
// tool calls the last run left pending, a tool message each; with "resume" (a list of
// payloads, or {"status": "cancelled"}) it answers the agent's pending interrupts in order.
//
// stdout: one JSON line per turn, {"turn", "runId", "ok", "error"?, "abortedAt"? (epoch ms),
// "events": [{"type", and its "messageId", "metadata", "outcome", "protocolVersion", "toolCallId",
// "toolCallName", "messages", "usage" where it has them}], "newMessages", "pendingInterrupts"},
// then {"messages": [...]} (what the
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
  if (turn.text !== undefined) agent.addMessage({ id: turn.id, role: "user", content: turn.text });
  if (turn.toolResults) {
    const answered = new Set(agent.messages.filter((m) => m.role === "tool").map((m) => m.toolCallId));
    for (const message of agent.messages) {
      for (const call of message.toolCalls ?? []) {
        if (answered.has(call.id) || !(call.function.name in turn.toolResults)) continue;
        agent.addMessage({
          id: `tool-result-${call.id}`,
          role: "tool",
          toolCallId: call.id,
          content: turn.toolResults[call.function.name],
        });
      }
    }
  }
  const parameters = { runId: turn.runId };
  if (turn.tools) parameters.tools = turn.tools;
  if (turn.resume) {
    parameters.resume = agent.pendingInterrupts.map((interrupt, index) => {
      const answer = turn.resume[Math.min(index, turn.resume.length - 1)];
      return answer.status === "cancelled"
        ? { interruptId: interrupt.id, status: "cancelled" }
        : { interruptId: interrupt.id, status: "resolved", payload: answer };
    });
  }
  const events = [];
  let abortedAt = null;
  const subscriber = {
    onEvent: ({ event }) => {
      const kept = { type: event.type };
      for (const key of ["messageId", "metadata", "outcome", "protocolVersion", "toolCallId", "toolCallName", "messages", "usage"]) {
        if (event[key] !== undefined) kept[key] = event[key];
      }
      events.push(kept);
      if (turn.abortOn && abortedAt === null && matches(event, turn.abortOn)) {
        abortedAt = Date.now();
        agent.abortRun();
      }
    },
  };
  try {
    const { newMessages } = await agent.runAgent(parameters, subscriber);
    const pendingInterrupts = agent.pendingInterrupts;
    write({ turn: index, runId: turn.runId, ok: true, abortedAt, events, newMessages, pendingInterrupts });
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
