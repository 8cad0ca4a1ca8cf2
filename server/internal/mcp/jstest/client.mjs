// Drives Pier's MCP endpoint with the official TypeScript client
// (@modelcontextprotocol/sdk, pinned in tools/package.json) and prints what
// it saw as one JSON document, which client_node_test.go checks.
//
//   PIER_MCP_URL=http://127.0.0.1:8080/mcp PIER_API_KEY=agk_… node client.mjs
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = new URL(process.env.PIER_MCP_URL);
const key = process.env.PIER_API_KEY;

// Every HTTP exchange the transport makes, to check the wire as well.
const exchanges = [];
const recordingFetch = async (input, init) => {
  const resp = await fetch(input, init);
  exchanges.push({
    method: init?.method ?? "GET",
    status: resp.status,
    contentType: resp.headers.get("content-type"),
    sessionId: resp.headers.get("mcp-session-id"),
    wwwAuthenticate: resp.headers.get("www-authenticate"),
  });
  return resp;
};

async function connect(headers) {
  const client = new Client({ name: "pier-node-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(url, {
    fetch: recordingFetch,
    requestInit: headers ? { headers } : undefined,
  });
  await client.connect(transport);
  return { client, transport };
}

const quote = { projectId: "prj_x", items: [{ kind: "domain", domain: "acme.dev" }] };

const anon = await connect();
const listed = await anon.client.listTools();
const out = {
  protocolVersion: anon.transport.protocolVersion,
  sessionId: anon.transport.sessionId ?? null,
  serverInfo: anon.client.getServerVersion(),
  tools: listed.tools,
  nextCursor: listed.nextCursor ?? null,
  search: await anon.client.callTool({
    name: "search_domains",
    arguments: { q: "acme", tldAllowlist: ["org", "dev", "com"], maxFirstYearPriceUsd: 50 },
  }),
  estimate: await anon.client.callTool({
    name: "estimate",
    arguments: { workload: "database_backed_app", monthlyRequests: 2000000 },
  }),
};
await anon.client.close();

// A governed tool without credentials: the transport answers 401 with the
// challenge an OAuth-capable client follows; this one has no auth provider,
// so the SDK throws.
const bare = await connect();
const wire = exchanges.length;
try {
  await bare.client.callTool({ name: "create_quote", arguments: quote });
  out.quoteWithoutKey = { thrown: false };
} catch (err) {
  out.quoteWithoutKey = { thrown: true, code: err.code ?? null, message: String(err.message) };
}
out.unauthorizedExchange = exchanges.length > wire ? exchanges[exchanges.length - 1] : null;
await bare.client.close().catch(() => {});

const keyed = await connect({ Authorization: `Bearer ${key}` });
out.quoteWithKey = await keyed.client.callTool({ name: "create_quote", arguments: quote });
await keyed.client.close();

out.exchanges = exchanges;
process.stdout.write(JSON.stringify(out) + "\n");
