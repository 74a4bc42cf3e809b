// cancel.mjs calls a tool with the official TypeScript MCP client over
// streamable HTTP, asking for progress, and aborts the call (AbortSignal:
// the client sends notifications/cancelled) at the first progress report;
// then it calls a second tool. It prints, as one JSON object on stdout,
// what the aborted call threw and what the second call got.
//
//   node cancel.mjs URL TOOL AFTER
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, tool, after] = process.argv.slice(2);
const client = new Client({ name: "ts-sdk-cancel", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
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
