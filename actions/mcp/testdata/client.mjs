// client.mjs drives the official TypeScript MCP client against a server
// and prints, as one JSON object on stdout, what each step got.
//
//   node client.mjs stdio COMMAND [ARG...]
//   node client.mjs http URL           (MCP_TOKEN: the bearer token, if any)
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [mode, target, ...rest] = process.argv.slice(2);
const transport = mode === "stdio"
  ? new StdioClientTransport({ command: target, args: rest, stderr: "inherit" })
  : new StreamableHTTPClientTransport(new URL(target), {
      requestInit: process.env.MCP_TOKEN ? { headers: { Authorization: `Bearer ${process.env.MCP_TOKEN}` } } : {},
    });
const client = new Client({ name: "ts-sdk-test", version: "1.0.0" }, { capabilities: { elicitation: {} } });
const elicited = [];
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  elicited.push(req.params.message);
  return { action: "accept", content: {} };
});

const out = {};
const step = async (name, f) => {
  try {
    out[name] = await f();
  } catch (e) {
    out[name] = { thrown: String(e && e.message ? e.message : e) };
  }
};

await client.connect(transport);
await step("tools", async () => (await client.listTools()).tools);
await step("add", () => client.callTool({ name: "Calculator.add", arguments: { a: 1, b: 2 } }));
await step("divide", () => client.callTool({ name: "Calculator.divide", arguments: { a: 1, b: 4 } }));
await step("divideByZero", () => client.callTool({ name: "Calculator.divide", arguments: { a: 1, b: 0 } }));
await step("missingArg", () => client.callTool({ name: "Calculator.add", arguments: { a: 1 } }));
await step("unknownTool", () => client.callTool({ name: "Calculator.nothing", arguments: {} }));
await step("reset", () => client.callTool({ name: "Calculator.reset", arguments: { reason: "a new day" } }));
await step("huge", () => client.callTool({ name: "Calculator.add", arguments: { a: 1, b: 2, note: "z".repeat(10 << 20) } }));
await step("afterHuge", () => client.callTool({ name: "Calculator.add", arguments: { a: 2, b: 2 } }));
out.elicited = elicited;
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
