// Checkpoints through the extension's TooldApi against the real daemon: list, diff,
// undo, and a Conflict whose data names the file changed outside toold.

import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";

import {
  checkpointRow,
  conflictPaths,
  isNotFound,
  newestFirst,
  restoredMessage,
} from "../checkpoints";
import { type Daemon, startDaemon } from "../testing/daemon";

describe("checkpoints", () => {
  let daemon: Daemon;
  const file = (): string => path.join(daemon.workspace, "notes.txt");

  before(async () => {
    daemon = await startDaemon();
  });

  after(async () => {
    assert.equal(await daemon.close(), 0, daemon.stderr());
  });

  test("undo with nothing recorded is NotFound", async () => {
    await assert.rejects(daemon.api.restoreCheckpoint(), (error: unknown) => isNotFound(error));
  });

  test("an edit is listed newest first and undo puts the file back byte for byte", async () => {
    writeFileSync(file(), "one\n");
    await daemon.api.callTool("read_file", { file_path: "notes.txt" });
    await daemon.api.callTool("write_file", { file_path: "notes.txt", content: "two\n" });
    await daemon.api.callTool("write_file", { file_path: "other.txt", content: "new\n" });
    const listed = newestFirst(await daemon.api.listCheckpoints());
    assert.deepEqual(
      listed.map((c) => [c.tool, c.paths]),
      [
        ["write_file", ["other.txt"]],
        ["write_file", ["notes.txt"]],
      ],
    );
    const [newest, older] = listed;
    assert.ok(newest && older);
    assert.equal(checkpointRow(older).label, "write_file: notes.txt");
    const diff = await daemon.api.checkpointDiff(older.id);
    assert.match(diff, /^-one$/m);
    assert.match(diff, /^\+two$/m);

    const result = await daemon.api.restoreCheckpoint(older.id);
    assert.deepEqual([...result.restored].sort(), ["notes.txt", "other.txt"]);
    assert.equal(readFileSync(file(), "utf8"), "one\n");
    assert.equal(
      restoredMessage(result, older),
      `toold: undid write_file (user, ${checkpointRow(older).description.split(" · ")[0] ?? ""}): ` +
        "restored notes.txt, other.txt.",
    );
    const after = await daemon.api.listCheckpoints();
    const undone = after.find((c) => c.id === older.id);
    assert.equal(undone?.undone, true);
    assert.equal(checkpointRow(undone).context, "checkpoint.undone");
  });

  test("a file changed outside toold is a Conflict naming it; force restores anyway", async () => {
    await daemon.api.callTool("write_file", { file_path: "notes.txt", content: "three\n" });
    writeFileSync(file(), "changed by hand\n");
    let caught: unknown;
    await daemon.api.restoreCheckpoint().catch((error: unknown) => {
      caught = error;
    });
    assert.deepEqual(conflictPaths(caught), ["notes.txt"]);
    assert.equal(readFileSync(file(), "utf8"), "changed by hand\n");
    const result = await daemon.api.restoreCheckpoint(undefined, true);
    assert.deepEqual(result.restored, ["notes.txt"]);
    assert.equal(readFileSync(file(), "utf8"), "one\n");
  });
});
