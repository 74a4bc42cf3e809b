// calls.mjs calls tools, without arguments, with the official TypeScript
// MCP client over streamable HTTP, and prints, as one JSON object on
// stdout, what each call got (or the text of what it threw: the client
// throws when a result's structured content fails the tool's output
// schema).
//
//   node calls.mjs URL TOOL...
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, ...tools] = process.argv.slice(2);
const client = new Client({ name: "ts-sdk-calls", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
await client.listTools(); // the client keeps the output schemas to validate with
const out = {};
for (const name of tools) {
  try {
    out[name] = await client.callTool({ name, arguments: {} });
  } catch (e) {
    out[name] = { thrown: String(e && e.message ? e.message : e) };
  }
}
await client.close();
process.stdout.write(JSON.stringify(out));
