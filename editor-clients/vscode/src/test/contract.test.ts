// The generated types follow protocol/schema.json, and the daemon serves exactly its methods.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { test } from "node:test";

import {
  buildInitializationOptions,
  DEFAULT_SETTINGS,
  NOTIFICATIONS,
  PROTOCOL_VERSION,
  REQUESTS,
} from "../protocol";
import { startDaemon } from "../testing/daemon";

const ROOT = path.join(__dirname, "..", "..");

test("src/generated/wire.ts is current with protocol/schema.json", () => {
  const run = spawnSync(
    process.execPath,
    [path.join(ROOT, "scripts", "generate-protocol.mjs"), "--check"],
    { encoding: "utf8" },
  );
  assert.equal(run.status, 0, run.stderr);
});

test("the daemon advertises the contract's methods and version", async () => {
  const daemon = await startDaemon();
  try {
    const capabilities = daemon.initializeResult.capabilities as {
      experimental: { toold: { methods: string[]; protocolVersion: string; workspace: string } };
    };
    const toold = capabilities.experimental.toold;
    assert.deepEqual([...toold.methods].sort(), [...REQUESTS, ...NOTIFICATIONS].sort());
    assert.equal(toold.protocolVersion, PROTOCOL_VERSION);
    assert.equal(path.resolve(toold.workspace), path.resolve(daemon.workspace));
    assert.deepEqual(daemon.initializeResult.serverInfo, {
      name: "toold",
      version: (daemon.initializeResult.serverInfo as { version: string }).version,
    });
  } finally {
    assert.equal(await daemon.close(), 0, daemon.stderr());
  }
});

test("initializationOptions carry only the settings the user chose", () => {
  assert.deepEqual(buildInitializationOptions("/ws", DEFAULT_SETTINGS), { workspace: "/ws" });
  assert.deepEqual(
    buildInitializationOptions("/ws", {
      ...DEFAULT_SETTINGS,
      permissionMode: "auto",
      toolRunner: "subprocess",
      executionEvents: true,
    }),
    {
      workspace: "/ws",
      config: { permissions: { mode: "auto" }, execution: { tool_runner: "subprocess" } },
      executionEvents: true,
    },
  );
});

test("the protocol logic never imports vscode, so it runs (and is tested) in plain Node", () => {
  const core = [
    "protocol",
    "client-core",
    "models",
    "launch",
    "schemaForm",
    "diagnostics",
    "generated/wire",
  ];
  for (const name of core) {
    const compiled = readFileSync(path.join(__dirname, "..", `${name}.js`), "utf8");
    const imports = [...compiled.matchAll(/require\("([^"]+)"\)/g)].map((m) => m[1]);
    assert.ok(!imports.includes("vscode"), `${name} imports vscode`);
    assert.ok(
      !imports.some((i) => i?.startsWith("vscode-languageclient")),
      `${name} imports vscode-languageclient`,
    );
  }
});
