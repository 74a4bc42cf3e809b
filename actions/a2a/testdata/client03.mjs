// The A2A JavaScript SDK speaking protocol 0.3 (its compatibility
// transport) to an agency-go server's 0.3 endpoint: node client03.mjs
// ENDPOINT. One JSON line per step, for TestJSClient03.
import { LegacyJsonRpcTransport } from '@a2a-js/sdk/compat/v0_3/client';
import { Role, TaskState } from '@a2a-js/sdk';
import { randomUUID } from 'node:crypto';

const [endpoint] = process.argv.slice(2);
const t = new LegacyJsonRpcTransport({ endpoint });
const out = (step, value) => console.log(JSON.stringify({ step, ...value }));
const request = (action, args) => ({
  tenant: '', metadata: undefined, configuration: undefined,
  message: {
    messageId: randomUUID(), contextId: '', taskId: '', role: Role.ROLE_USER, metadata: undefined, extensions: [], referenceTaskIds: [],
    parts: [{ content: { $case: 'data', value: { action, args } }, metadata: undefined, filename: '', mediaType: '' }],
  },
});
const view = (task) => ({ state: TaskState[task.status?.state], result: task.artifacts?.[0]?.parts?.[0]?.content?.value, text: task.status?.message?.parts?.[0]?.content?.value });

try {
  const added = await t.sendMessage(request('add', { a: 1, b: 2 }));
  out('send', view(added));
  out('get', view(await t.getTask({ tenant: '', id: added.id })));
  out('failed', view(await t.sendMessage(request('divide', { a: 1, b: 0 }))));
} catch (e) {
  out('error', { error: String(e?.message ?? e) });
}
