// "toold: Ask Agent…" on the wire: agent/run {prompt, workDoneToken}, each tool call a
// $/progress report, cancel through the progress token, the fix when no API key is set.
// The model is a real HTTP server on 127.0.0.1 speaking Anthropic's Messages API (the
// public internet is the one thing a test cannot reach); the daemon's SDK talks to it.

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";

import { type CancellationToken, CancellationTokenSource } from "vscode-jsonrpc/node";

import { agentUnavailableFix, type Endpoint, isCancelled, TooldApi } from "../client-core";
import { renderAgentAnswer } from "../models";
import type { WorkDoneProgressValue } from "../protocol";
import { type Daemon, startDaemon, withTimeout } from "../testing/daemon";

const API_KEY = "test-key";

type Block = Record<string, unknown>;
/** One scripted model turn: content blocks, or a promise the test resolves later. */
type Turn = Block[] | Promise<Block[]>;

/** Scripted Messages API: each POST /v1/messages answers with the next turn. */
class ModelServer {
  readonly requests: Record<string, unknown>[] = [];
  private readonly turns: Turn[] = [];
  private readonly server: Server;
  private ids = 0;

  constructor() {
    this.server = createServer((req, res) => {
      void this.answer(req).then(([status, body]) => {
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify(body));
      });
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    const { port } = this.server.address() as AddressInfo;
    return `http://127.0.0.1:${String(port)}`;
  }

  script(...turns: Turn[]): void {
    this.turns.push(...turns);
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => {
      this.server.close(() => {
        resolve();
      });
    });
  }

  private async answer(req: IncomingMessage): Promise<[number, unknown]> {
    let raw = "";
    for await (const chunk of req) raw += String(chunk);
    if (req.headers["x-api-key"] !== API_KEY && req.headers.authorization !== `Bearer ${API_KEY}`) {
      return [401, { type: "error", error: { type: "authentication_error", message: "bad key" } }];
    }
    this.requests.push(JSON.parse(raw) as Record<string, unknown>);
    const turn = this.turns.shift();
    if (turn === undefined) {
      return [400, { type: "error", error: { type: "invalid_request_error", message: "none" } }];
    }
    const content = await turn;
    this.ids += 1;
    return [
      200,
      {
        id: `msg_${String(this.ids)}`,
        type: "message",
        role: "assistant",
        model: "test-model",
        content,
        stop_reason: content.some((b) => b.type === "tool_use") ? "tool_use" : "end_turn",
        stop_sequence: null,
        usage: { input_tokens: 10, output_tokens: 5 },
      },
    ];
  }
}

function toolUse(id: string, name: string, input: Record<string, unknown>): Block[] {
  return [{ type: "tool_use", id, name, input }];
}

function agentEnv(baseUrl?: string): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.ANTHROPIC_API_KEY;
  delete env.ANTHROPIC_BASE_URL;
  if (baseUrl !== undefined) {
    env.ANTHROPIC_API_KEY = API_KEY;
    env.ANTHROPIC_BASE_URL = baseUrl;
  }
  return env;
}

describe("Ask Agent (agent/run)", () => {
  const model = new ModelServer();
  let daemon: Daemon;

  before(async () => {
    const url = await model.listen();
    daemon = await startDaemon({ env: agentEnv(url), settings: { permissionMode: "bypass" } });
  });

  after(async () => {
    assert.equal(await daemon.close(), 0, daemon.stderr());
    await model.close();
  });

  test("agent/run streams each tool call as $/progress and answers the final text", async () => {
    model.script(toolUse("toolu_1", "bash", { command: "echo from-the-agent > agent.txt" }), [
      { type: "text", text: "Wrote **agent.txt**." },
    ]);
    const sent: { method: string; params: unknown }[] = [];
    const connection = daemon.connection;
    const recording: Endpoint = {
      sendRequest: <R>(method: string, params: unknown, token?: CancellationToken) => {
        sent.push({ method, params });
        return token === undefined
          ? connection.sendRequest<R>(method, params)
          : connection.sendRequest<R>(method, params, token);
      },
      sendNotification: (method, params) => connection.sendNotification(method, params),
      onNotification: (method, handler) => connection.onNotification(method, handler),
      onRequest: (method, handler) => connection.onRequest(method, handler),
      onProgress: (type, token, handler) => connection.onProgress(type, token, handler),
    };
    const values: WorkDoneProgressValue[] = [];
    const text = await new TooldApi(recording).runAgent("write agent.txt", {
      onProgress: (value) => values.push(value),
    });
    assert.equal(text, "Wrote **agent.txt**.");
    assert.ok(existsSync(path.join(daemon.workspace, "agent.txt")));
    assert.equal(sent.length, 1);
    const [request] = sent;
    assert.equal(request?.method, "agent/run");
    const params = request.params as Record<string, unknown>;
    assert.deepEqual(Object.keys(params).sort(), ["prompt", "workDoneToken"]);
    assert.equal(params.prompt, "write agent.txt");
    assert.equal(typeof params.workDoneToken, "string");
    assert.deepEqual(
      values.map((v) => v.kind),
      ["begin", "report", "end"],
    );
    assert.match(values[1]?.message ?? "", /^bash: .*echo from-the-agent/);
    const [first] = model.requests;
    assert.deepEqual(first?.messages, [{ role: "user", content: "write agent.txt" }]);
  });

  test("cancelling the token stops the agent (RequestCancelled)", async () => {
    let release: (blocks: Block[]) => void = () => undefined;
    model.script(
      new Promise<Block[]>((resolve) => {
        release = resolve;
      }),
    );
    const source = new CancellationTokenSource();
    let begun: () => void = () => undefined;
    const begin = new Promise<void>((resolve) => {
      begun = resolve;
    });
    const settled = daemon.api
      .runAgent("wait for ever", {
        token: source.token,
        onProgress: (value) => {
          if (value.kind === "begin") begun();
        },
      })
      .then(
        (text) => new Error(`the cancelled agent/run answered ${text}`),
        (error: unknown) => error,
      );
    await withTimeout(begin, "the agent's begin report");
    source.cancel();
    const outcome = await withTimeout(settled, "the cancelled agent/run's answer");
    assert.ok(isCancelled(outcome), String(outcome));
    release([{ type: "text", text: "too late" }]);
  });

  test("renderAgentAnswer quotes the prompt, lists the tool calls, ends with the text", () => {
    const doc = renderAgentAnswer("fix `it`", ["bash: {'command': 'ls'}"], "Done.");
    assert.match(doc, /^# toold agent\n\n> fix `it`\n/);
    assert.match(doc, /1 tool call\(s\)/);
    assert.match(doc, /- `bash: \{'command': 'ls'\}`/);
    assert.ok(doc.trimEnd().endsWith("Done."));
  });
});

describe("Ask Agent without an API key", () => {
  let daemon: Daemon;

  before(async () => {
    daemon = await startDaemon({ env: agentEnv() });
  });

  after(async () => {
    assert.equal(await daemon.close(), 0, daemon.stderr());
  });

  test("agent/run is refused and the client names the fix", async () => {
    const error = await daemon.api.runAgent("hello").then(
      () => assert.fail("agent/run answered without an API key"),
      (e: unknown) => e,
    );
    const fix = agentUnavailableFix(error);
    assert.ok(fix, String(error));
    assert.match(fix, /ANTHROPIC_API_KEY is not set\)\. Set ANTHROPIC_API_KEY in the environment/);
    assert.match(fix, /\[agent\] api_key_env/);
    assert.match(fix, /toold: Restart Daemon/);
    assert.equal(agentUnavailableFix(new Error("other")), undefined);
  });
});
