// The A2A JavaScript SDK as a client of an agency-go server: node client.mjs
// BASE_URL [TOKEN]. It prints one JSON line per step, for the Go test that
// runs it (TestJSClient) to check; a step that throws prints its error.
import { ClientFactory } from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';
import { randomUUID } from 'node:crypto';

const [base, token] = process.argv.slice(2);
const options = token ? { serviceParameters: { Authorization: `Bearer ${token}` } } : undefined;
const out = (step, value) => console.log(JSON.stringify({ step, ...value }));
const state = (t) => TaskState[t.status?.state];

const message = (part) => ({
  messageId: randomUUID(), contextId: '', taskId: '', role: Role.ROLE_USER,
  parts: [{ ...part, metadata: undefined, filename: '', mediaType: '' }],
  metadata: undefined, extensions: [], referenceTaskIds: [],
});
const call = (action, args) => message({ content: { $case: 'data', value: { action, args } } });
const request = (msg, returnImmediately = false) => ({
  tenant: '', message: msg, metadata: undefined,
  configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately },
});
const content = (t) => t.artifacts?.[0]?.parts?.[0]?.content?.value;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(client, id, wanted) {
  for (let i = 0; i < 200; i++) {
    const t = await client.getTask({ tenant: '', id }, options);
    if (state(t) === wanted) return t;
    await sleep(50);
  }
  throw new Error(`task ${id} never reached ${wanted}`);
}

async function step(name, f) {
  try {
    out(name, await f());
  } catch (e) {
    out(name, { error: String(e?.message ?? e) });
  }
}

const factory = new ClientFactory();
const client = await factory.createFromUrl(base);
const card = await client.getAgentCard();
out('card', { name: card.name, skills: card.skills.map((s) => s.id), url: card.supportedInterfaces?.[0]?.url });

let added;
await step('send', async () => {
  added = await client.sendMessage(request(call('add', { a: 1, b: 2 })), options);
  return { state: state(added), result: content(added) };
});
await step('get', async () => {
  const t = await client.getTask({ tenant: '', id: added.id }, options);
  return { state: state(t), result: content(t) };
});
await step('failed', async () => {
  const t = await client.sendMessage(request(call('divide', { a: 1, b: 0 })), options);
  return { state: state(t), text: t.status?.message?.parts?.[0]?.content?.value };
});
await step('input-required', async () => {
  const t = await client.sendMessage(request(call('reset', {})), options);
  out('waiting', { state: state(t), id: t.id });
  const done = await until(client, t.id, 'TASK_STATE_COMPLETED');
  return { state: state(done), result: content(done) };
});
await step('cancel', async () => {
  const t = await client.sendMessage(request(call('wait', {}), true), options);
  const c = await client.cancelTask({ tenant: '', id: t.id, metadata: undefined }, options);
  const after = await until(client, t.id, 'TASK_STATE_CANCELED');
  return { first: state(t), canceled: state(c), state: state(after) };
});
await step('stream', async () => {
  const events = [];
  for await (const ev of client.sendMessageStream(request(call('add', { a: 2, b: 3 })), options)) {
    const p = ev.payload ?? ev;
    const kind = p.$case ?? (p.status ? 'task' : 'other');
    const v = p.value ?? p;
    if (kind === 'task') events.push(`task:${TaskState[v.status?.state]}`);
    else if (kind === 'statusUpdate') events.push(`status:${TaskState[v.status?.state]}`);
    else if (kind === 'artifactUpdate') events.push(`artifact:${JSON.stringify(v.artifact?.parts?.[0]?.content?.value)}`);
    else events.push(kind);
  }
  return { events };
});
await step('unknown-task', async () => {
  await client.getTask({ tenant: '', id: 'no-such-task' }, options);
  return { found: true };
});
