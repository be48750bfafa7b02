// An agent whose host code is TypeScript, start to finish: declare its kinds with zod, open a
// session, watch the session's live events, run one turn in which the host tags a review and the
// model tags a report through the tag_artifact tool (a scripted model answer stands in for the
// provider call), revise the review (versions, a diff, a pin), move it to another session (the
// watcher sees it leave as "moved"), then check the turn as an eval would.
//
//   clients/typescript/examples/run          (one command: installs, builds, serves, runs)
//
// Against your own server: ARTIFACTS_URL=http://127.0.0.1:8000 ARTIFACTS_AGENT=<slug>
// ARTIFACTS_AGENT_KEY=<its key> (`manage.py create_agent my-agent` then
// `manage.py create_agent_key my-agent | tail -1`). Without them it starts a throwaway server of
// this checkout (python -m tests.kit_server, agent "declared": made with create_agent, no kinds
// until this declares them) and stops it at the end.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { z } from "zod";
import { ArtifactsError, connect, defineArtifacts } from "agent-artifacts";

const kinds = defineArtifacts({
  kinds: {
    "reviewed-pr": {
      description: "A pull request this agent reviewed.",
      schema: z.object({ url: z.string(), verdict: z.string().default("comment") }),
    },
    report: { description: "A generated report." },
  },
  agentTool: true,
  max: 1000,
});

async function server() {
  if (process.env.ARTIFACTS_URL && process.env.ARTIFACTS_AGENT_KEY) {
    return {
      baseUrl: process.env.ARTIFACTS_URL,
      key: process.env.ARTIFACTS_AGENT_KEY,
      agent: process.env.ARTIFACTS_AGENT ?? "reviewer",
      stop: async () => {},
    };
  }
  const root = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
  const python = process.env.ARTIFACTS_SERVER_PYTHON ?? join(root, ".venv", "bin", "python");
  const child = spawn(python, ["-m", "tests.kit_server"], { cwd: root, stdio: ["pipe", "pipe", "inherit"] });
  const [line] = await Promise.race([
    new Promise((done) => createInterface({ input: child.stdout }).once("line", (l) => done([l]))),
    new Promise((_, fail) => child.once("exit", (code) => fail(new Error(`the server exited with ${code}`)))),
  ]);
  const info = JSON.parse(line);
  console.log(`server: a throwaway daphne of this checkout at ${info.base}`);
  return {
    baseUrl: info.base,
    key: info.keys.declared,
    agent: "declared",
    stop: () => new Promise((done) => (child.once("exit", done), child.stdin.end())),
  };
}

const { baseUrl, key, agent, stop: stopServer } = await server();
try {
  const client = connect({ baseUrl, key, agent, kinds });
  try {
    const declared = await client.declare(); // PUT artifacts/kinds: the zod schemas as JSON Schema
    console.log(`declared on ${agent}: ${declared.kinds.map((k) => k.name).join(", ")} (agentTool ${declared.agentTool}, max ${declared.max})`);
  } catch (error) {
    if (!(error instanceof ArtifactsError && error.code === "kinds_in_code")) throw error;
    console.log(`${agent} declares its kinds in Python on the server: using those`);
  }
  const { id: sessionId } = await client.createSession();
  console.log(`session: ${sessionId}`);

  // Watch the session as a supervisor's page would; replay from the start, then live.
  const events = [];
  const stop = new AbortController();
  const stream = client.subscribe({ sessionId, after: 0, signal: stop.signal });
  const watching = (async () => {
    for await (const event of stream) {
      events.push(event);
      if (event.type === "replay.truncated") continue;
      // A view of the session drops a record on artifact.deleted, whatever the reason; "moved"
      // means it went on in another session, whose data this viewer is never sent.
      const why = event.type === "artifact.deleted" ? ` (${event.reason})` : "";
      console.log(`  event #${event.seq} ${event.type}${why} ${event.record.kind} ${event.record.key ?? event.record.id}`);
    }
  })();

  const prUrl = "https://github.com/o/r/pull/7";
  const turn = await client.captureTurn({ turnId: "t-1" }, async () => {
    const artifacts = client.forSession(sessionId);
    // The host records the review; zod fills the default verdict before sending.
    const review = await artifacts.tag({
      kind: "reviewed-pr", key: prUrl, title: `Reviewed ${prUrl}`, data: { url: prUrl },
      contents: "# Review\nLooks good.", contentType: "text/markdown",
    });
    console.log(`host tagged ${review.id}: ${JSON.stringify(review.data)} (${review.content.size} bytes of ${review.content.contentType})`);

    // The model is handed the tool generated from the agent's kinds…
    const tool = await artifacts.tool("anthropic");
    console.log(`tool for the model: ${tool.name}, kinds ${tool.input_schema.properties.artifact.anyOf.map((b) => b.properties.kind.enum?.[0] ?? b.properties.kind.const).join(", ")}`);
    // …and answers with a tool_use block (scripted here; messages.create in a real agent).
    const block = { type: "tool_use", id: "toolu_01", name: "tag_artifact",
      input: { artifact: { kind: "report", key: "weekly-48", title: "Weekly report", data: "# Week 48\nAll green." } } };
    const result = await artifacts.runTool(block.input);
    console.log(`model's call -> ${JSON.stringify(result.anthropic(block.id))}`);

    // A call the model got wrong is a result it can act on, not an exception.
    const bad = await artifacts.runTool({ artifact: { kind: "reviewed-pr", key: null, title: null, data: { verdict: "approve" } } });
    console.log(`model's bad call -> is_error=${bad.anthropic("toolu_02").is_error}: ${bad.content}`);
  });

  try {
    await client.tag({ kind: "reviewed-pr", data: { verdict: 3 } });
  } catch (error) {
    if (!(error instanceof ArtifactsError)) throw error;
    console.log(`refused before sending: ${error.code} ${JSON.stringify(error.details)}`);
  }

  const listed = await client.forSession(sessionId).list();
  console.log(`session holds ${listed.length} artifacts, newest first: ${listed.map((r) => `${r.kind}/${r.source}`).join(", ")}`);
  const content = await client.content(listed.find((r) => r.kind === "reviewed-pr").id);
  console.log(`review content: ${JSON.stringify(await content.text())}`);

  // The review is revised: every tag of a key is a new version; diff says what changed.
  const revised = await client.tag({ kind: "reviewed-pr", key: prUrl, title: `Reviewed ${prUrl}`,
                                     data: { url: prUrl, verdict: "approve" }, sessionId });
  const diff = await client.diff(revised.id, revised.version);
  console.log(`versions of the review: ${(await client.versions(revised.id)).map((v) => v.version).join(", ")}; ` +
              `v${diff.from} -> v${diff.to}: ${JSON.stringify(diff.data)}`);
  await client.pin(revised.id);
  // Moving it to another session: this session's watcher sees it leave (reason "moved").
  const { id: elsewhere } = await client.createSession();
  await client.tag({ kind: "reviewed-pr", key: prUrl, data: { url: prUrl, verdict: "approve" }, sessionId: elsewhere });

  const ok = turn.taggedArtifact("report", (record) => record.source === "model");
  console.log(`eval: the model tagged a report in turn t-1: ${ok}; tagged in the turn: ${turn.records.map((r) => `${r.kind}@${r.turnId}`).join(", ")}`);
  while (!events.some((e) => e.type === "artifact.deleted")) await new Promise((r) => setTimeout(r, 50));
  stop.abort(); // ends the stream, and the loop above with it
  await watching;
  console.log(`events seen live: ${events.length}`);
  if (!ok) process.exitCode = 1;
} finally {
  await stopServer();
}
