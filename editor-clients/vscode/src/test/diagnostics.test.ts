// What the agent's edits broke: toold's diagnostics mapped for the Problems panel, and
// diagnostics/changed from a real ruff server (`ruff server`, which toold starts beside its
// Python) reaching the extension's client-core after a write, then cleared by the fix.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { absolutePath, problemSource, SEVERITY, toProblem } from "../diagnostics";
import type { DiagnosticsChanged } from "../protocol";
import { type Daemon, startDaemon, withTimeout } from "../testing/daemon";

describe("diagnostics → Problems", () => {
  test("a wire diagnostic becomes a 0-based problem whose source names toold and the server", () => {
    const problem = toProblem({
      path: "pkg/a.py",
      line: 3,
      column: 8,
      severity: "warning",
      message: "`os` imported but unused",
      source: "Ruff",
      code: "F401",
    });
    assert.deepEqual(problem, {
      line: 2,
      column: 7,
      severity: SEVERITY.warning,
      message: "`os` imported but unused",
      source: "toold: Ruff",
      code: "F401",
    });
  });

  test("no code is no code; no source still says toold", () => {
    const problem = toProblem({
      path: "a.ts",
      line: 1,
      column: 1,
      severity: "error",
      message: "x",
    });
    assert.equal(problem.code, undefined);
    assert.equal(problem.severity, SEVERITY.error);
    assert.equal(
      problemSource({ path: "a", line: 1, column: 1, severity: "hint", message: "" }),
      "toold: language server",
    );
    assert.deepEqual(
      (["error", "warning", "information", "hint"] as const).map((s) => SEVERITY[s]),
      [0, 1, 2, 3], // vscode.DiagnosticSeverity's values
    );
  });

  test("wire paths are relative to the workspace root", () => {
    assert.equal(absolutePath("/ws/", "pkg/a.py"), "/ws/pkg/a.py");
    assert.equal(absolutePath("/ws", "/elsewhere/b.py"), "/elsewhere/b.py");
  });
});

describe("diagnostics/changed from a real ruff server", () => {
  let daemon: Daemon;
  const changes: DiagnosticsChanged[] = [];

  before(async () => {
    daemon = await startDaemon();
    daemon.api.onNotification("diagnostics/changed", (p) => {
      changes.push(p);
    });
  });

  after(async () => {
    assert.equal(await daemon.close(), 0, daemon.stderr());
  });

  /** The next diagnostics/changed for `path` that `accept` takes. */
  async function changed(
    path: string,
    accept: (p: DiagnosticsChanged) => boolean,
  ): Promise<DiagnosticsChanged> {
    const seen = (): DiagnosticsChanged | undefined =>
      changes.find((p) => p.path === path && accept(p));
    return withTimeout(
      new Promise<DiagnosticsChanged>((resolve) => {
        const found = seen();
        if (found !== undefined) {
          resolve(found);
          return;
        }
        const sub = daemon.api.onNotification("diagnostics/changed", () => {
          const now = seen();
          if (now !== undefined) {
            sub.dispose();
            resolve(now);
          }
        });
      }),
      () => `diagnostics/changed for ${path} (got ${JSON.stringify(changes)})`,
    );
  }

  test("a write with an unused import reports F401; the fix clears the file", async () => {
    const result = await daemon.api.callTool("write_file", {
      file_path: "broken.py",
      content: "import os\n",
    });
    assert.equal(result.isError, false, result.content as string);
    const broken = await changed("broken.py", (p) => p.diagnostics.length > 0);
    const problems = broken.diagnostics.map(toProblem);
    assert.deepEqual(
      problems.map((p) => [p.line, p.column, p.code, p.source.toLowerCase()]),
      [[0, 7, "F401", "toold: ruff"]],
    );
    changes.length = 0;
    await daemon.api.callTool("read_file", { file_path: "broken.py" });
    const fixed = await daemon.api.callTool("write_file", {
      file_path: "broken.py",
      content: "import os\n\nprint(os.sep)\n",
    });
    assert.equal(fixed.isError, false, fixed.content as string);
    await changed("broken.py", (p) => p.diagnostics.length === 0);
  });
});
