// cancel.mjs calls a tool with the official TypeScript MCP client, asking
// for progress, and aborts the call (AbortSignal: the client sends
// notifications/cancelled) at the first progress report; then it calls a
// second tool. It prints, as one JSON object on stdout, what the aborted
// call threw and what the second call got.
//
//   node cancel.mjs http URL TOOL AFTER
//   node cancel.mjs stdio TOOL AFTER COMMAND [ARG...]   (the server gets this environment)
//
// It waits (up to 20 s) for TOOL to be listed: a server that finds its
// tools on a broker may list it only after its first survey.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, ...rest] = process.argv.slice(2);
let transport, tool, after;
if (mode === "stdio") {
  const [t, a, command, ...args] = rest;
  [tool, after] = [t, a];
  transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
} else {
  const [url, t, a] = rest;
  [tool, after] = [t, a];
  transport = new StreamableHTTPClientTransport(new URL(url));
}
const client = new Client({ name: "ts-sdk-cancel", version: "1.0.0" });
await client.connect(transport);
for (let i = 0; ; i++) {
  const { tools } = await client.listTools();
  if (tools.some((t) => t.name === tool)) break;
  if (i === 100) throw new Error(`${tool} is not listed`);
  await new Promise((r) => setTimeout(r, 200));
}
const out = {};
const controller = new AbortController();
try {
  out.result = await client.callTool({ name: tool, arguments: {} }, undefined, {
    signal: controller.signal,
    onprogress: () => controller.abort("the test aborts the call"),
  });
} catch (e) {
  out.aborted = String(e && e.message ? e.message : e);
  if (e && e.name) out.aborted = e.name + ": " + out.aborted;
}
out.after = await client.callTool({ name: after, arguments: {} });
await client.close();
process.stdout.write(JSON.stringify(out));
