// A foreign ACP client: the TypeScript SDK (@agentclientprotocol/sdk) drives `toold acp`.
//
// Usage: node node_client.mjs '<json plan>'
// The plan: {command: [...argv], cwd, env, answers: [optionId...], mcpServers?, unstable?,
// clientCapabilities?, steps: [...]}. Each step is {prompt: text}, {prompt: text, cancelOn:
// text} (session/cancel once a tool call's output contains that text), {setMode: id},
// {close: true} (session/close), {reconnect: true} (end this `toold acp`, start another and
// initialize it) or {resume: true} (session/resume of the session session/new made).
// `unstable: true` imports the SDK's `/unstable` entry point, whose schemas know ACP v1's
// unstable parts (`clientCapabilities.subagents`, `subagent_update`).
//
// The SDK parses every request and notification the agent sends with its generated zod
// schemas before a handler sees it (one that does not parse is logged and dropped): the
// handlers below are registered by method name without a parser of their own, as a wildcard
// or a custom parser would get the raw params. It does not parse results, so this client
// parses them with the same schemas. Prints one JSON record on stdout: what the SDK parsed
// (initialize, session/new, resume and close results, notifications, permission requests,
// stop reasons, errors), each result as sent and as parsed (`results`), every message as it
// came off the wire (`wire`), and every complaint of the SDK or of a schema (`invalid`);
// tests/acp/node_sdk.py compares them.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { Readable, Writable } from "node:stream";

const plan = JSON.parse(process.argv[2]);
const entry = plan.unstable ? "@agentclientprotocol/sdk/unstable" : "@agentclientprotocol/sdk";
const { client, ndJsonStream } = await import(entry);
// The entry point's own generated schemas (not exported: found beside the entry module).
const beside = plan.unstable ? "./schema/zod.gen.js" : "../schema/zod.gen.js";
const schemas = await import(new URL(beside, import.meta.resolve(entry)));
const RESULTS = {
  initialize: schemas.zInitializeResponse,
  "session/new": schemas.zNewSessionResponse,
  "session/resume": schemas.zResumeSessionResponse,
  "session/close": schemas.zCloseSessionResponse,
  "session/set_mode": schemas.zSetSessionModeResponse,
  "session/prompt": schemas.zPromptResponse,
};

const record = {
  notifications: [],
  permissions: [],
  closed: [],
  results: [],
  stops: [],
  errors: [],
  wire: [],
  invalid: [],
};
// The SDK reports a message its schemas reject on console.error, then drops it.
const logError = console.error;
console.error = (...args) => {
  record.invalid.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" "));
  logError(...args);
};

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
    record.notifications.push(params);
    const update = params.update;
    if (cancelOn !== null && update.sessionUpdate === "tool_call_update") {
      const text = JSON.stringify(update.content ?? []);
      if (text.includes(cancelOn)) {
        cancelOn = null;
        agentContext.notify("session/cancel", { sessionId });
      }
    }
  });

/** A request whose result is parsed with the SDK's schema for it. */
async function request(agent, method, params) {
  const result = await agent.request(method, params);
  const parsed = RESULTS[method].safeParse(result);
  if (!parsed.success) {
    record.invalid.push(`${method} result: ${parsed.error.message}`);
    return result;
  }
  record.results.push({ method, sent: result, parsed: parsed.data });
  return parsed.data;
}

/** A new `toold acp`; the SDK's stream over its stdio, with a copy of what it sends. */
function start() {
  const child = spawn(plan.command[0], plan.command.slice(1), {
    cwd: plan.cwd,
    env: plan.env,
    stdio: ["pipe", "pipe", "inherit"],
  });
  const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const tap = new TransformStream({
    transform(message, controller) {
      record.wire.push(structuredClone(message));
      controller.enqueue(message);
    },
  });
  const readable = stream.readable.pipeThrough(tap);
  return { child, stream: { readable, writable: stream.writable } };
}

/** One connection: initialize, then the steps up to the next reconnect; the rest. */
async function connection(agent, steps) {
  agentContext = agent;
  const initialize = await request(agent, "initialize", {
    protocolVersion: 1,
    clientCapabilities: plan.clientCapabilities ?? {
      fs: { readTextFile: false, writeTextFile: false },
    },
  });
  record.initialize ??= initialize;
  if (sessionId === null) {
    record.session = await request(agent, "session/new", {
      cwd: plan.cwd,
      mcpServers: plan.mcpServers ?? [],
    });
    sessionId = record.session.sessionId;
  }
  while (steps.length > 0) {
    const step = steps.shift();
    if (step.reconnect) return steps;
    if (step.setMode) {
      await request(agent, "session/set_mode", { sessionId, modeId: step.setMode });
      continue;
    }
    try {
      if (step.close) {
        record.closed.push(await request(agent, "session/close", { sessionId }));
      } else if (step.resume) {
        const params = { sessionId, cwd: plan.cwd, mcpServers: plan.mcpServers ?? [] };
        record.resumed = await request(agent, "session/resume", params);
      } else {
        cancelOn = step.cancelOn ?? null;
        const prompt = [{ type: "text", text: step.prompt }];
        const reply = await request(agent, "session/prompt", { sessionId, prompt });
        record.stops.push(reply.stopReason);
      }
    } catch (error) {
      record.errors.push({ code: error.code, message: error.message });
    }
  }
  return steps;
}

let steps = [...plan.steps];
do {
  const { child, stream } = start();
  steps = await app.connectWith(stream, (agent) => connection(agent, steps));
  child.stdin.end();
  if (child.exitCode === null && child.signalCode === null) await once(child, "exit");
} while (steps.length > 0);
process.stdout.write(JSON.stringify(record) + "\n");
