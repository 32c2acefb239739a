// A foreign ACP client: the TypeScript SDK (@agentclientprotocol/sdk) drives `toold acp`.
//
// Usage: node node_client.mjs '<json plan>'
// The plan: {command: [...argv], cwd, env, answers: [optionId...], mcpServers?, steps: [...]};
// each step is {prompt: text}, {prompt: text, cancelOn: text} (session/cancel once a tool
// call's output contains that text) or {setMode: id}. Prints one JSON record of everything the
// agent sent (initialize and session/new results, updates, permission requests, stop
// reasons, errors) on stdout; the pytest test asserts on it.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { client, ndJsonStream } from "@agentclientprotocol/sdk";

const plan = JSON.parse(process.argv[2]);
const record = { updates: [], permissions: [], stops: [], errors: [] };
const child = spawn(plan.command[0], plan.command.slice(1), {
  cwd: plan.cwd,
  env: plan.env,
  stdio: ["pipe", "pipe", "inherit"],
});
const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
let cancelOn = null;
let sessionId = null;
let agentContext = null;

const app = client({ name: "toold-node-test" })
  .onRequest("session/request_permission", ({ params }) => {
    record.permissions.push(params);
    const optionId = plan.answers.shift();
    if (optionId === undefined) return { outcome: { outcome: "cancelled" } };
    return { outcome: { outcome: "selected", optionId } };
  })
  .onNotification("session/update", ({ params }) => {
    record.updates.push(params.update);
    const update = params.update;
    if (cancelOn !== null && update.sessionUpdate === "tool_call_update") {
      const text = JSON.stringify(update.content ?? []);
      if (text.includes(cancelOn)) {
        cancelOn = null;
        agentContext.notify("session/cancel", { sessionId });
      }
    }
  });

await app.connectWith(stream, async (agent) => {
  agentContext = agent;
  record.initialize = await agent.request("initialize", {
    protocolVersion: 1,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false } },
  });
  record.session = await agent.request("session/new", {
    cwd: plan.cwd,
    mcpServers: plan.mcpServers ?? [],
  });
  sessionId = record.session.sessionId;
  for (const step of plan.steps) {
    if (step.setMode) {
      await agent.request("session/set_mode", { sessionId, modeId: step.setMode });
      continue;
    }
    cancelOn = step.cancelOn ?? null;
    try {
      const reply = await agent.request("session/prompt", {
        sessionId,
        prompt: [{ type: "text", text: step.prompt }],
      });
      record.stops.push(reply.stopReason);
    } catch (error) {
      record.errors.push({ code: error.code, message: error.message });
    }
  }
});
child.stdin.end();
await new Promise((resolve) => child.once("exit", resolve));
process.stdout.write(JSON.stringify(record) + "\n");
