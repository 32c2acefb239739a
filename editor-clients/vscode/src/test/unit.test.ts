// Pure logic: schema → inputs, launch resolution, permission answers, results.

import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, describe, test } from "node:test";

import { answerShowMessageRequest } from "../client-core";
import { expandPath, LaunchError, resolveLaunch, which } from "../launch";
import { renderResult, summarizeResult } from "../models";
import { DEFAULT_SETTINGS } from "../protocol";
import {
  collectArguments,
  fieldsFromSchema,
  type InputRequest,
  parseFieldValue,
  type PickRequest,
  type Prompter,
} from "../schemaForm";

const GREP_LIKE = {
  type: "object" as const,
  properties: {
    pattern: { type: "string", description: "Regex.", minLength: 1 },
    path: { type: "string", default: "." },
    output_mode: {
      type: "string",
      enum: ["content", "files_with_matches", "count"],
      default: "content",
    },
    limit: { anyOf: [{ type: "integer" }, { type: "null" }], default: null, minimum: 1 },
    append: { type: "boolean", default: false },
    depends_on: { type: "array", items: { type: "string" } },
    headers: { type: "object", additionalProperties: { type: "string" } },
  },
  required: ["pattern"],
};

describe("schema → inputs", () => {
  test("fields keep their kinds, required first", () => {
    const fields = fieldsFromSchema(GREP_LIKE);
    assert.deepEqual(
      fields.map((f) => [f.name, f.kind, f.required]),
      [
        ["pattern", "string", true],
        ["path", "string", false],
        ["output_mode", "enum", false],
        ["limit", "integer", false],
        ["append", "boolean", false],
        ["depends_on", "json", false],
        ["headers", "json", false],
      ],
    );
    const limit = fields.find((f) => f.name === "limit");
    assert.equal(limit?.defaultValue, undefined, "a null default is no default");
    assert.equal(limit?.minimum, 1);
  });

  test("values are parsed and checked per kind", () => {
    const [pattern, , , limit, append, dependsOn, headers] = fieldsFromSchema(GREP_LIKE);
    assert.ok(pattern && limit && append && dependsOn && headers);
    assert.deepEqual(parseFieldValue(pattern, ""), {
      ok: false,
      error: "pattern must not be empty",
    });
    assert.deepEqual(parseFieldValue(limit, "12"), { ok: true, value: 12 });
    assert.deepEqual(parseFieldValue(limit, "0"), { ok: false, error: "limit must be at least 1" });
    assert.deepEqual(parseFieldValue(limit, "1.5"), {
      ok: false,
      error: "limit must be a whole number",
    });
    assert.deepEqual(parseFieldValue(append, "TRUE"), { ok: true, value: true });
    assert.deepEqual(parseFieldValue(dependsOn, '["a","b"]'), { ok: true, value: ["a", "b"] });
    assert.equal(parseFieldValue(dependsOn, '{"a":1}').ok, false);
    assert.deepEqual(parseFieldValue(headers, '{"A":"b"}'), { ok: true, value: { A: "b" } });
    assert.equal(parseFieldValue(headers, "[1]").ok, false);
    assert.equal(parseFieldValue(headers, "{oops").ok, false);
  });

  test("collectArguments asks required fields, then the optional ones picked", async () => {
    const inputs: InputRequest[] = [];
    const picks: string[] = [];
    const typed: Record<string, string> = { pattern: "def main", limit: "", depends_on: '["x"]' };
    const prompter: Prompter = {
      input: (req) => {
        inputs.push(req);
        const name = req.title.split(": ").pop() ?? "";
        return Promise.resolve(typed[name]);
      },
      pick: <T>(req: PickRequest<T>) => {
        picks.push(req.title);
        return Promise.resolve(req.items.find((i) => i.label === "count")?.value);
      },
      pickMany: <T>(req: PickRequest<T>) =>
        Promise.resolve(
          req.items
            .filter((i) => ["output_mode", "limit", "depends_on"].includes(i.label))
            .map((i) => i.value),
        ),
    };
    const args = await collectArguments("grep", GREP_LIKE, prompter);
    assert.deepEqual(args, { pattern: "def main", output_mode: "count", depends_on: ["x"] });
    assert.deepEqual(
      inputs.map((i) => i.title),
      [
        "grep — required 1/1: pattern",
        "grep — optional 2/3: limit",
        "grep — optional 3/3: depends_on",
      ],
    );
    assert.deepEqual(picks, ["grep — optional 1/3: output_mode"]);
    assert.equal(inputs[1]?.validate(""), undefined, "an optional field may stay empty");
    assert.equal(inputs[1]?.validate("x"), "limit must be a whole number");
  });

  test("cancelling any prompt cancels the whole form", async () => {
    const prompter: Prompter = {
      input: () => Promise.resolve(undefined),
      pick: () => Promise.resolve(undefined),
      pickMany: () => Promise.resolve([]),
    };
    assert.equal(await collectArguments("grep", GREP_LIKE, prompter), undefined);
  });
});

describe("launching toold", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "toold-launch-"));
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  const script = (name: string, body: string): string => {
    const file = path.join(dir, name);
    writeFileSync(file, `#!/bin/sh\n${body}\n`);
    chmodSync(file, 0o755);
    return file;
  };

  test("toold on PATH is found; a missing one names the install command", async () => {
    script("toold", "exit 0");
    const env = { PATH: dir };
    const spec = await resolveLaunch(DEFAULT_SETTINGS, { env, platform: "linux" });
    assert.equal(spec.command, path.join(dir, "toold"));
    assert.deepEqual(spec.args, ["serve", "--log-level", "info"]);
    await assert.rejects(
      resolveLaunch(DEFAULT_SETTINGS, { env: { PATH: path.join(dir, "nothing") } }),
      (error: unknown) => {
        assert.ok(error instanceof LaunchError);
        assert.match(error.message, /toold was not found on PATH/);
        assert.match(error.message, /pip install toold/);
        assert.match(error.message, /pip install -e/);
        return true;
      },
    );
  });

  test("toold.path must be an executable; ${workspaceFolder} and relative paths resolve", async () => {
    const tool = script("my-toold", "exit 0");
    const ctx = { env: {}, workspace: dir };
    const spec = await resolveLaunch(
      { ...DEFAULT_SETTINGS, path: "${workspaceFolder}/my-toold" },
      ctx,
    );
    assert.equal(spec.command, tool);
    assert.equal(expandPath("./my-toold", ctx), tool);
    await assert.rejects(
      resolveLaunch({ ...DEFAULT_SETTINGS, path: "/no/such/toold" }, ctx),
      /toold.path is "\/no\/such\/toold", which is not an executable file/,
    );
  });

  test("toold.pythonPath runs `python -P -m toold serve` once python can import toold", async () => {
    // -P (safe path): the probe and the daemon never import from the cwd.
    const good = script("good-python", '[ "$1" = -P ] || exit 3');
    const bad = script(
      "bad-python",
      "echo \"ModuleNotFoundError: No module named 'toold'\" >&2; exit 1",
    );
    const ctx = { env: {}, workspace: dir };
    const spec = await resolveLaunch(
      { ...DEFAULT_SETTINGS, pythonPath: good, logLevel: "debug" },
      ctx,
    );
    assert.deepEqual(
      [spec.command, ...spec.args],
      [good, "-P", "-m", "toold", "serve", "--log-level", "debug"],
    );
    await assert.rejects(
      resolveLaunch({ ...DEFAULT_SETTINGS, pythonPath: bad }, ctx),
      /cannot import toold \(ModuleNotFoundError: No module named 'toold'\)\. Install it with `pip install toold`/,
    );
    assert.equal(await which("definitely-not-a-command-xyz", { env: { PATH: dir } }), undefined);
  });
});

describe("client helpers", () => {
  test("a showMessageRequest answer is the chosen action, or null", async () => {
    const params = {
      type: 2,
      message: "toold: the agent wants to run bash {} (shell command). Allow it?",
      actions: [{ title: "Allow" }, { title: "Always allow" }, { title: "Deny" }],
    };
    assert.deepEqual(
      await answerShowMessageRequest(params, (_m, _t, isPermission) =>
        Promise.resolve(isPermission ? "Always allow" : "Deny"),
      ),
      { title: "Always allow" },
    );
    assert.equal(await answerShowMessageRequest(params, () => Promise.resolve(undefined)), null);
    assert.equal(
      await answerShowMessageRequest(
        { ...params, actions: [{ title: "OK" }] },
        (_m, titles, isPermission) => Promise.resolve(isPermission ? "Allow" : titles[0]),
      ).then((a) => a?.title),
      "OK",
    );
  });

  test("results render as text or JSON", () => {
    assert.deepEqual(renderResult({ content: "plain" }), { text: "plain", language: "plaintext" });
    assert.deepEqual(renderResult({ content: { a: 1 } }), {
      text: '{\n  "a": 1\n}',
      language: "json",
    });
    assert.equal(
      summarizeResult("bash", {
        content: "Command failed with exit code 2\nmore",
        isError: true,
        exitCode: 2,
      }),
      "bash failed (exit 2): Command failed with exit code 2",
    );
  });
});
