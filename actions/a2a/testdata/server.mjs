// An A2A agent served by the A2A JavaScript SDK, for the Go test that joins
// it to a space (TestJSServer): node server.mjs. It prints "listening URL"
// once it serves. Its agent, Echo, answers text with "echo: TEXT"; told
// "ask", it asks for a name (TASK_STATE_INPUT_REQUIRED) and greets the
// answer; told "slow", it never answers until canceled, and then prints
// "canceled TASK".
import express from 'express';
import { randomUUID } from 'node:crypto';
import { Role, TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';

const app = express();
const server = app.listen(0, '127.0.0.1', () => {
  const url = `http://127.0.0.1:${server.address().port}/`;
  const card = {
    name: 'Echo', description: 'Says back what it is told.', version: '1.0.0',
    supportedInterfaces: [{ url, protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' }],
    capabilities: { streaming: true, pushNotifications: false, extensions: [] },
    defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
    skills: [{ id: 'shout', name: 'shout', description: 'Says it back in capitals.', tags: ['echo'], examples: ['hello'], inputModes: [], outputModes: [], securityRequirements: [] }],
    securitySchemes: {}, securityRequirements: [], signatures: [],
  };
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new Echo());
  app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler }));
  app.use('/', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  console.log(`listening ${url}`);
});

const text = (t) => ({ content: { $case: 'text', value: t }, metadata: undefined, filename: '', mediaType: '' });
const agentMessage = (ctx, t) => ({
  messageId: randomUUID(), contextId: ctx.contextId, taskId: ctx.taskId, role: Role.ROLE_AGENT,
  parts: [text(t)], metadata: undefined, extensions: [], referenceTaskIds: [],
});

class Echo {
  canceled = new Set();

  async execute(ctx, bus) {
    const msg = ctx.userMessage;
    const said = msg.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
    const task = ctx.task ?? {
      id: ctx.taskId, contextId: ctx.contextId, artifacts: [], history: [msg], metadata: undefined,
      status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: new Date().toISOString() },
    };
    bus.publish(AgentEvent.task(task));
    const status = (state, message) => bus.publish(AgentEvent.statusUpdate({
      taskId: ctx.taskId, contextId: ctx.contextId, metadata: undefined,
      status: { state, message, timestamp: new Date().toISOString() },
    }));
    if (said === 'slow') {
      status(TaskState.TASK_STATE_WORKING, undefined);
      while (!this.canceled.has(ctx.taskId)) await new Promise((r) => setTimeout(r, 20));
      bus.finished();
      return;
    }
    let answer;
    if (ctx.task?.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED) {
      answer = `hello, ${said}`;
    } else if (said === 'ask') {
      status(TaskState.TASK_STATE_INPUT_REQUIRED, agentMessage(ctx, 'What is your name?'));
      bus.finished();
      return;
    } else {
      answer = msg.metadata?.skill === 'shout' ? said.toUpperCase() : `echo: ${said}`;
    }
    bus.publish(AgentEvent.artifactUpdate({
      taskId: ctx.taskId, contextId: ctx.contextId, append: false, lastChunk: true, metadata: undefined,
      artifact: { artifactId: randomUUID(), name: 'answer', description: '', parts: [text(answer)], metadata: undefined, extensions: [] },
    }));
    status(TaskState.TASK_STATE_COMPLETED, undefined);
    bus.finished();
  }

  async cancelTask(taskId, bus) {
    this.canceled.add(taskId);
    console.log(`canceled ${taskId}`);
    bus.publish(AgentEvent.statusUpdate({
      taskId, contextId: '', metadata: undefined,
      status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: new Date().toISOString() },
    }));
    bus.finished();
  }
}
