// The official A2A JavaScript client (@a2a-js/sdk, pinned in package.json), unmodified:
// it reads the agent card at <base>/.well-known/agent-card.json, streams one task with
// sendMessageStream (JSON-RPC, A2A 1.0), then reads it back with getTask. Each stream
// response is printed as a JSON line in the protocol's JSON (the SDK's StreamResponse.toJSON),
// then the task read back, as a stream response holding it. The Bearer token goes on every
// request through the fetch it is given.
// Usage: node stream_task.mjs <base url> <token> <text>
import { Role, StreamResponse } from "@a2a-js/sdk";
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";

const [base, token, text] = process.argv.slice(2);
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
let taskId;
for await (const event of client.sendMessageStream({
  message: {
    messageId: crypto.randomUUID(),
    role: Role.ROLE_USER,
    parts: [{ content: { $case: "text", value: text } }],
  },
})) {
  taskId ??= event.payload?.$case === "task" ? event.payload.value.id : undefined;
  console.log(JSON.stringify(StreamResponse.toJSON(event)));
}
const task = await client.getTask({ id: taskId });
console.log(JSON.stringify(StreamResponse.toJSON({ payload: { $case: "task", value: task } })));
