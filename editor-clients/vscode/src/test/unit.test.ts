// Pure logic: schema → inputs, launch resolution, permission answers, results.

import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, describe, test } from "node:test";

import { answerShowMessageRequest } from "../client-core";
import { expandPath, LaunchError, type LaunchLookups, resolveLaunch, which } from "../launch";
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
        assert.match(error.message, /toold was not found: tried .*PATH\./);
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

describe("the launch order", () => {
  const ws = "/ws";
  const onPath = "/usr/bin/toold";
  const settings = { ...DEFAULT_SETTINGS, path: "", pythonPath: "" };

  /** Lookups over an imaginary machine: these executables, these pythons that hold toold. */
  function machine(
    executables: string[],
    interpreter: Awaited<ReturnType<LaunchLookups["selectedInterpreter"]>>,
    withToold: string[] = [],
  ): { lookups: LaunchLookups; asked: string[] } {
    const asked: string[] = [];
    const lookups: LaunchLookups = {
      isExecutable: (file) => Promise.resolve(executables.includes(file)),
      cannotImportToold: (python) =>
        Promise.resolve(withToold.includes(python) ? undefined : "No module named 'toold'"),
      selectedInterpreter: () => {
        asked.push("python extension");
        return Promise.resolve(interpreter);
      },
    };
    return { lookups, asked };
  }

  const launch = (m: { lookups: LaunchLookups }, s = settings, platform = "linux" as const) =>
    resolveLaunch(s, { env: { PATH: "/usr/bin" }, workspace: ws, platform, lookups: m.lookups });

  test("the settings come first: the Python extension is never asked", async () => {
    const m = machine(["/opt/toold", "/py/bin/python", onPath], { python: "/sel/python" }, [
      "/py/bin/python",
      "/sel/python",
    ]);
    const byPath = await launch(m, {
      ...settings,
      path: "/opt/toold",
      pythonPath: "/py/bin/python",
    });
    assert.equal(byPath.source, "toold.path");
    assert.equal(byPath.command, "/opt/toold");
    const byPython = await launch(m, { ...settings, pythonPath: "/py/bin/python" });
    assert.equal(byPython.source, "toold.pythonPath");
    assert.deepEqual(byPython.args.slice(0, 3), ["-P", "-m", "toold"]);
    assert.deepEqual(m.asked, []);
  });

  test("then the Python extension's interpreter, when it can import toold", async () => {
    const files = [`${ws}/.venv/bin/toold`, onPath];
    const selected = await launch(machine(files, { python: "/sel/python" }, ["/sel/python"]));
    assert.equal(selected.source, "python extension");
    assert.deepEqual(
      [selected.command, ...selected.args],
      ["/sel/python", "-P", "-m", "toold", "serve", "--log-level", "info"],
    );
    // Selected but without toold: on to the workspace's .venv.
    const without = await launch(machine(files, { python: "/sel/python" }));
    assert.equal(without.source, "venv");
  });

  test("then .venv, then venv, in the workspace, then PATH", async () => {
    const none = { missing: "not installed" };
    const dotVenv = await launch(machine([`${ws}/.venv/bin/toold`, `${ws}/venv/bin/toold`], none));
    assert.equal(dotVenv.command, `${ws}/.venv/bin/toold`);
    assert.equal(dotVenv.description, `${ws}/.venv/bin/toold (the workspace's .venv)`);
    const venv = await launch(machine([`${ws}/venv/bin/toold`, onPath], none));
    assert.equal(venv.command, `${ws}/venv/bin/toold`);
    const fromPath = await launch(machine([onPath], none));
    assert.deepEqual([fromPath.source, fromPath.command], ["PATH", onPath]);
  });

  test("PATH starts with $VIRTUAL_ENV's bin, which a login shell's PATH drops", async () => {
    const m = machine(["/tmp/venv/bin/toold", onPath], { missing: "not installed" });
    const ctx = { workspace: ws, platform: "linux" as const, lookups: m.lookups };
    const env = { PATH: "/usr/bin", VIRTUAL_ENV: "/tmp/venv" };
    const spec = await resolveLaunch(settings, { ...ctx, env });
    assert.deepEqual([spec.source, spec.command], ["VIRTUAL_ENV", "/tmp/venv/bin/toold"]);
    const gone = machine([], { missing: "not installed" }).lookups;
    await assert.rejects(
      resolveLaunch(settings, { ...ctx, env, lookups: gone }),
      /venv\/bin\/toold, \/tmp\/venv\/bin\/toold, PATH\./,
    );
  });

  test("on Windows the virtualenvs' Scripts\\toold.exe", async () => {
    const exe = "C:\\ws\\.venv\\Scripts\\toold.exe";
    const spec = await resolveLaunch(settings, {
      env: { PATH: "" },
      workspace: "C:\\ws",
      platform: "win32",
      lookups: machine([exe], { missing: "not installed" }).lookups,
    });
    assert.equal(spec.command, exe);
  });

  test("not found: the error names everything that was tried, in order", async () => {
    await assert.rejects(launch(machine([], { missing: "not installed" })), (error: unknown) => {
      assert.ok(error instanceof LaunchError);
      assert.equal(
        error.message.split(" Install it")[0],
        "toold was not found: tried toold.path (unset), toold.pythonPath (unset), " +
          "the Python extension's interpreter (not installed), " +
          `${ws}/.venv/bin/toold, ${ws}/venv/bin/toold, PATH.`,
      );
      assert.match(error.message, /Install it with `pip install toold`/);
      assert.match(error.message, /`toold\.path`/);
      return true;
    });
    await assert.rejects(
      launch(machine([], { python: "/sel/python" })),
      /the Python extension's interpreter \(\/sel\/python cannot import toold\)/,
    );
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
