// The official A2A JavaScript client (@a2a-js/sdk, pinned in package.json), unmodified,
// through an approval: it streams one task with sendMessageStream (JSON-RPC, A2A 1.0) until
// the task asks for input with the approval request's data part, answers it on the same task
// with a second sendMessageStream (a data part {interruptId, approved} for "approve-data",
// the text otherwise, e.g. "reject: not now"), then reads the task back with getTask. Each
// stream response is printed as a JSON line in the protocol's JSON (StreamResponse.toJSON),
// the two streams parted by a line {"answered": true}, then the task read back.
// Usage: node approve_task.mjs <base url> <token> <text> <answer>
import { Role, StreamResponse } from "@a2a-js/sdk";
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";

const [base, token, text, answer] = process.argv.slice(2);
const authorized = (input, init = {}) => {
  const headers = new Headers(init.headers);
  headers.set("Authorization", `Bearer ${token}`);
  return fetch(input, { ...init, headers });
};
const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  transports: [new JsonRpcTransportFactory({ fetchImpl: authorized })],
  cardResolver: new DefaultAgentCardResolver({ fetchImpl: authorized }),
});
const client = await new ClientFactory(options).createFromUrl(base);

const stream = async (message) => {
  let last;
  for await (const event of client.sendMessageStream({ message })) {
    console.log(JSON.stringify(StreamResponse.toJSON(event)));
    last = event;
  }
  return last;
};

const asked = await stream({
  messageId: crypto.randomUUID(),
  role: Role.ROLE_USER,
  parts: [{ content: { $case: "text", value: text } }],
});
const update = asked.payload.value;
const request = update.status.message;
const interrupts = request.parts
  .filter((part) => part.content?.$case === "data" && part.content.value.interrupt)
  .map((part) => part.content.value.interrupt);
const parts =
  answer === "approve-data"
    ? interrupts.map((item) => ({
        content: { $case: "data", value: { interruptId: item.id, approved: true } },
      }))
    : [{ content: { $case: "text", value: answer } }];
console.log(JSON.stringify({ answered: true }));
await stream({
  messageId: crypto.randomUUID(),
  role: Role.ROLE_USER,
  taskId: update.taskId,
  contextId: update.contextId,
  parts,
});
const task = await client.getTask({ id: update.taskId });
console.log(JSON.stringify(StreamResponse.toJSON({ payload: { $case: "task", value: task } })));
