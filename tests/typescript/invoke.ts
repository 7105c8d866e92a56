// Calls a live skilld through openapi-fetch, typed by the `paths` that
// openapi-typescript generated from the committed OpenAPI document into
// skilld.d.ts. `tsc --strict` checks this file against those types before
// node runs it: a document that lies about a body fails here.
//
// Usage: node dist/invoke.js BASE_URL TOKEN
import createClient from "openapi-fetch";
import type { components, paths } from "./skilld.js";

type Envelope = components["schemas"]["Envelope"];

const [base, token] = process.argv.slice(2);
if (!base || !token) throw new Error("usage: invoke.js BASE_URL TOKEN");
// JSON answers and problems only: the event-stream answers of the same
// operations are for streaming clients.
const client = createClient<paths, "application/json" | "application/problem+json">({
  baseUrl: base,
  headers: { Authorization: `Bearer ${token}` },
});

function fail(what: string, detail: unknown): never {
  throw new Error(`${what}: ${JSON.stringify(detail)}`);
}

const skills = await client.GET("/skills");
if (!skills.data) fail("GET /skills", skills.error);
const names: string[] = skills.data.skills.map((s) => s.name);
if (!names.includes("text-tools")) fail("the bundled skills", names);

const called = await client.POST("/tools/{tool}/invoke", {
  params: { path: { tool: "text_tools_word_count" } },
  body: { arguments: { args: ["--text", "one two three"] } },
});
if (!called.data) fail("invoke text_tools_word_count", called.error);
// 200 is an Envelope or a DryRun, 202 an InvokeAccepted: only an
// Envelope has `output`.
if (!("output" in called.data)) fail("an envelope", called.data);
const envelope: Envelope = called.data;
if (!envelope.success || !envelope.output.includes('"words": 3')) fail("the envelope", envelope);

const missing = await client.POST("/tools/{tool}/invoke", {
  params: { path: { tool: "no_such_tool" } },
  body: { arguments: {} },
});
if (missing.response.status !== 404 || !missing.error) fail("a missing tool", missing.response.status);
const problem = missing.error;
if (!problem.detail.includes("no_such_tool")) fail("the problem names the tool", problem);

console.log(`typescript client: ok (run ${envelope.run_id}, ${envelope.duration_ms} ms)`);
