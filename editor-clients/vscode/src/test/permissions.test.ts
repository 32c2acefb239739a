// The daemon's permission prompt (window/showMessageRequest) answered by the client,
// and the permission settings sent as initializationOptions.config.

import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";

import { type Chooser, handlePermissionRequests, TooldApi } from "../client-core";
import { renderResult } from "../models";
import { PERMISSION_ACTIONS, type PermissionsPreview, PREVIEW_CAPABILITY } from "../protocol";
import { type Daemon, startDaemon } from "../testing/daemon";

const SHOW_MESSAGE = { window: { showMessage: { messageActionItem: {} } } };

describe("permission requests", () => {
  let daemon: Daemon;
  let answer: string | undefined;
  const asked: { message: string; titles: string[]; isPermission: boolean }[] = [];

  before(async () => {
    const choose: Chooser = (message, titles, isPermission) => {
      asked.push({ message, titles, isPermission });
      return Promise.resolve(answer);
    };
    daemon = await startDaemon({
      capabilities: SHOW_MESSAGE,
      beforeInitialize: (connection) => handlePermissionRequests(connection, choose),
    });
  });

  after(async () => {
    assert.equal(await daemon.close(), 0, daemon.stderr());
  });

  test("Allow lets the agent's write_file run", async () => {
    answer = "Allow";
    asked.length = 0;
    const result = await daemon.api.callTool(
      "write_file",
      { file_path: "allowed.txt", content: "hello" },
      { origin: "agent" },
    );
    assert.equal(result.isError, false, renderResult(result).text);
    assert.equal(readFileSync(path.join(daemon.workspace, "allowed.txt"), "utf8"), "hello");
    assert.equal(asked.length, 1);
    const [question] = asked;
    assert.ok(question);
    assert.deepEqual(question.titles, [...PERMISSION_ACTIONS]);
    assert.equal(question.isPermission, true);
    assert.match(question.message, /the agent wants to run write_file/);
  });

  test("Deny refuses it with 'User denied.'", async () => {
    answer = "Deny";
    const result = await daemon.api.callTool(
      "write_file",
      { file_path: "denied.txt", content: "nope" },
      { origin: "agent" },
    );
    assert.equal(result.isError, true);
    assert.equal(result.content, "User denied.");
    assert.equal(existsSync(path.join(daemon.workspace, "denied.txt")), false);
  });

  test("dismissing the prompt (no choice) denies", async () => {
    answer = undefined;
    const result = await daemon.api.callTool(
      "write_file",
      { file_path: "dismissed.txt", content: "nope" },
      { origin: "agent" },
    );
    assert.equal(result.content, "User denied.");
  });

  test("the user's own calls (origin user) are not asked about", async () => {
    asked.length = 0;
    const result = await daemon.api.callTool(
      "write_file",
      { file_path: "mine.txt", content: "mine" },
      { origin: "user" },
    );
    assert.equal(result.isError, false);
    assert.equal(asked.length, 0);
  });

  test("permissions/setMode plan blocks the agent's writes without asking", async () => {
    assert.equal(await daemon.api.setMode("plan"), "plan");
    asked.length = 0;
    const result = await daemon.api.callTool(
      "write_file",
      { file_path: "planned.txt", content: "x" },
      { origin: "agent" },
    );
    assert.equal(result.isError, true);
    assert.match(String(result.content), /Plan mode: write_file blocked/);
    assert.equal(asked.length, 0);
    assert.equal(await daemon.api.setMode("default"), "default");
  });
});

describe("settings as initializationOptions", () => {
  test("permissionMode bypass and executionEvents reach the daemon", async () => {
    const daemon = await startDaemon({
      capabilities: SHOW_MESSAGE,
      settings: { permissionMode: "bypass", toolRunner: "local", executionEvents: true },
      beforeInitialize: (connection) =>
        handlePermissionRequests(connection, () => {
          throw new Error("bypass mode must not ask");
        }),
    });
    try {
      const events: { event: string; runner: string; tool: string }[] = [];
      daemon.api.onNotification("execution/event", (e) => events.push(e));
      const result = await daemon.api.callTool(
        "write_file",
        { file_path: "bypassed.txt", content: "ok" },
        { origin: "agent" },
      );
      assert.equal(result.isError, false, renderResult(result).text);
      assert.equal(readFileSync(path.join(daemon.workspace, "bypassed.txt"), "utf8"), "ok");
      // execution/event for the call precedes its result on the wire.
      assert.ok(
        events.some((e) => e.event === "execution.completed" && e.tool === "write_file"),
        JSON.stringify(events),
      );
      assert.ok(
        events.every((e) => e.runner === "local"),
        JSON.stringify(events),
      );
    } finally {
      assert.equal(await daemon.close(), 0, daemon.stderr());
    }
  });
});

describe("edit previews (experimental.toold.diffPreview)", () => {
  test("permissions/preview carries the file's texts and arrives before the prompt", async () => {
    const seen: string[] = [];
    const previews: PermissionsPreview[] = [];
    let api: TooldApi | undefined;
    const daemon = await startDaemon({
      capabilities: { ...SHOW_MESSAGE, experimental: PREVIEW_CAPABILITY },
      beforeInitialize: (connection) => {
        api = new TooldApi(connection);
        api.onNotification("permissions/preview", (p) => {
          seen.push("preview");
          previews.push(p);
        });
        handlePermissionRequests(connection, (message) => {
          seen.push(`prompt: ${message}`);
          return Promise.resolve("Allow");
        });
      },
    });
    try {
      writeFileSync(path.join(daemon.workspace, "greeting.txt"), "hello\n");
      await daemon.api.callTool("read_file", { file_path: "greeting.txt" }, { origin: "agent" });
      const result = await daemon.api.callTool(
        "edit_file",
        { file_path: "greeting.txt", old_text: "hello", new_text: "goodbye" },
        { origin: "agent" },
      );
      assert.equal(result.isError, false, renderResult(result).text);
      assert.equal(seen.length, 2, JSON.stringify(seen));
      assert.equal(seen[0], "preview");
      assert.match(seen[1] ?? "", /^prompt: .*edit_file/);
      assert.doesNotMatch(seen[1] ?? "", /\+goodbye/); // the diff went to the preview
      const [preview] = previews;
      assert.ok(preview);
      assert.equal(preview.tool, "edit_file");
      assert.deepEqual(preview.files, [
        { path: "greeting.txt", original: "hello\n", modified: "goodbye\n" },
      ]);
      assert.match(preview.diff, /^-hello$/m);
      assert.match(preview.diff, /^\+goodbye$/m);
      assert.ok(api);
    } finally {
      assert.equal(await daemon.close(), 0, daemon.stderr());
    }
  });
});
