// tools/list, tools/call, $/progress and cancellation against the real daemon.

import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";

import { CancellationTokenSource, ResponseError } from "vscode-jsonrpc/node";

import { describeError, isCancelled } from "../client-core";
import { renderResult, summarizeResult } from "../models";
import { ERROR_CODES, type WorkDoneProgressValue } from "../protocol";
import { collectArguments, type Prompter } from "../schemaForm";
import { type Daemon, startDaemon, withTimeout } from "../testing/daemon";

describe("tools over the wire", () => {
  let daemon: Daemon;

  before(async () => {
    daemon = await startDaemon();
    writeFileSync(path.join(daemon.workspace, "main.py"), "def main():\n    print('needle')\n");
  });

  after(async () => {
    assert.equal(await daemon.close(), 0, daemon.stderr());
  });

  test("tools/list returns the native catalogue with JSON Schemas", async () => {
    const tools = await daemon.api.listTools();
    const names = tools.map((t) => t.name);
    for (const expected of ["read_file", "write_file", "grep", "bash", "background_run"]) {
      assert.ok(names.includes(expected), `${expected} missing from ${names.join(", ")}`);
    }
    for (const tool of tools) {
      assert.equal(tool.parameters.type, "object", tool.name);
      assert.equal(typeof tool.description, "string");
    }
  });

  test("tools/call runs grep for the user and returns its matches", async () => {
    const result = await daemon.api.callTool("grep", { pattern: "needle" }, { origin: "user" });
    assert.equal(result.isError, false);
    assert.equal(renderResult(result).text, "main.py:2:    print('needle')");
    assert.match(summarizeResult("grep", result), /^grep: main\.py:2/);
  });

  test("arguments collected from a tool's schema run that tool", async () => {
    const tools = await daemon.api.listTools();
    const readFile = tools.find((t) => t.name === "read_file");
    assert.ok(readFile);
    const answers = new Map<string, string>([["file_path", "main.py"]]);
    const prompter: Prompter = {
      input: (req) => {
        const name = req.title.split(": ").pop() ?? "";
        const answer = answers.get(name) ?? "";
        assert.equal(req.validate(answer), undefined, `${name}=${answer}`);
        return Promise.resolve(answer);
      },
      pick: () => Promise.resolve(undefined),
      pickMany: () => Promise.resolve([]),
    };
    const args = await collectArguments("read_file", readFile.parameters, prompter);
    assert.deepEqual(args, { file_path: "main.py" });
    const result = await daemon.api.callTool("read_file", args);
    assert.equal(renderResult(result).text, "1: def main():\n2:     print('needle')");
  });

  test("a tool failure is an isError result, an unknown tool a -32602 error", async () => {
    const bad = await daemon.api.callTool("read_file", { file_path: "missing.txt" });
    assert.equal(bad.isError, true);
    await assert.rejects(daemon.api.callTool("no_such_tool", {}), (error: unknown) => {
      assert.ok(error instanceof ResponseError);
      assert.equal(error.code, ERROR_CODES.InvalidParams);
      assert.match(describeError(error), /Unknown tool: no_such_tool \(InvalidParams\)/);
      return true;
    });
  });

  test("$/progress reports begin, output and end for a call with a work-done token", async () => {
    const seen: WorkDoneProgressValue[] = [];
    const result = await daemon.api.callTool(
      "bash",
      { command: "echo first; echo second" },
      { origin: "user", onProgress: (v) => seen.push(v) },
    );
    assert.equal(result.exitCode, 0);
    assert.deepEqual(seen[0], { kind: "begin", title: "bash", cancellable: true });
    assert.deepEqual(seen[seen.length - 1], { kind: "end", message: "done" });
    const reported = seen
      .filter((v) => v.kind === "report")
      .map((v) => v.message ?? "")
      .join("");
    assert.match(reported, /first/);
  });

  test("cancelling a call sends $/cancelRequest: -32800 and a cancelled progress end", async () => {
    const source = new CancellationTokenSource();
    const seen: WorkDoneProgressValue[] = [];
    let began: () => void = () => undefined;
    const begun = new Promise<void>((resolve) => {
      began = resolve;
    });
    const call = daemon.api.callTool(
      "bash",
      { command: "echo started; sleep 30" },
      {
        origin: "user",
        token: source.token,
        onProgress: (v) => {
          seen.push(v);
          if (v.kind === "report") began();
        },
      },
    );
    await withTimeout(begun, "bash to report output");
    source.cancel();
    await assert.rejects(withTimeout(call, "the cancelled call to answer"), (error: unknown) => {
      assert.ok(isCancelled(error), describeError(error));
      return true;
    });
    // The call is answered after its progress ends; a later request proves the daemon lives.
    const after = await daemon.api.callTool("bash", { command: "echo alive" });
    assert.equal(renderResult(after).text.trim(), "alive");
    assert.deepEqual(seen[seen.length - 1], { kind: "end", message: "cancelled" });
  });
});
