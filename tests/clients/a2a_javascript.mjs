// The official A2A JavaScript SDK (@a2a-js/sdk, pinned in package.json)
// against a relay, for `tests/relay/a2a.rs`: one round trip, streamed as
// the card offers. Prints one JSON line when the question is on its way,
// and one with the task it came to.
//
//   node a2a_javascript.mjs AGENT_URL SENDER_TOKEN
import { randomUUID } from 'node:crypto';
import { Role, TaskState } from '@a2a-js/sdk';
import {
  ClientFactory,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  createAuthenticatingFetchWithRetry,
} from '@a2a-js/sdk/client';

const [url, token] = process.argv.slice(2);
const withToken = createAuthenticatingFetchWithRetry(fetch, {
  headers: async () => ({ Authorization: `Bearer ${token}` }),
  shouldRetryWithHeaders: async () => undefined,
});
const factory = new ClientFactory({
  transports: [new JsonRpcTransportFactory({ fetchImpl: withToken })],
  cardResolver: new DefaultAgentCardResolver({ fetchImpl: withToken }),
});
// The resolver reads the card relative to the URL: the agent's URL is a
// folder to it, as A2A's own examples write it.
const client = await factory.createFromUrl(url.endsWith('/') ? url : `${url}/`);
const text = (message) =>
  (message?.parts ?? []).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');

const card = await client.getAgentCard();
// As the card offers: a stream of the task's changes, to the answer.
const question = {
  message: {
    messageId: randomUUID(),
    role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: 'is the build green?' } }],
  },
};
let task;
const states = [];
for await (const event of client.sendMessageStream(question)) {
  const { $case, value } = event.payload ?? {};
  if ($case === 'task') {
    task = { id: value.id, status: value.status };
  } else if ($case === 'statusUpdate') {
    task.status = value.status;
  } else {
    throw new Error(`an event of kind ${$case}`);
  }
  states.push(TaskState[task.status?.state]);
  // The test answers once the stream has said where the task stands.
  if (states.length === 1) {
    console.log(JSON.stringify({ step: 'asking', streaming: card.capabilities?.streaming === true, state: states[0] }));
  }
}
console.log(
  JSON.stringify({
    step: 'answered',
    id: task.id,
    state: TaskState[task.status?.state],
    states,
    text: text(task.status?.message),
  }),
);
