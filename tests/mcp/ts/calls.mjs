// The official MCP TypeScript SDK's client (what the MCP Inspector is built on) calling tools of
// a live server. Usage: node calls.mjs <mcp url> <bearer token> <calls as JSON: [[name, args], …]>
// Prints one JSON line: {"tools": [names], "calls": [{"result": CallToolResult} | {"thrown":
// {"name", "code", "message"}}]} — "thrown" is what the SDK raised instead of answering, as when
// structured content fails the tool's output schema (-32602).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, callsJson] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "agent-artifacts-tests", version: "0.0.0" });
await client.connect(transport);
// The client validates structured content against output schemas it has listed.
const { tools } = await client.listTools();
const calls = [];
for (const [name, args] of JSON.parse(callsJson)) {
  try {
    calls.push({ result: await client.callTool({ name, arguments: args }) });
  } catch (error) {
    calls.push({ thrown: { name: error?.name, code: error?.code, message: String(error?.message) } });
  }
}
await client.close();
process.stdout.write(JSON.stringify({ tools: tools.map((tool) => tool.name), calls }) + "\n");
