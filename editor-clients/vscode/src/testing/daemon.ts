// Test harness: the real `toold serve`, launched through launch.ts and driven over stdio
// with vscode-jsonrpc, as vscode-languageclient would (VS Code itself cannot run here).
// TOOLD_PYTHON (an interpreter with toold installed) or TOOLD_PATH picks the daemon;
// otherwise `toold` from PATH.

import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { pathToFileURL } from "node:url";

import {
  createMessageConnection,
  type Disposable,
  type MessageConnection,
  StreamMessageReader,
  StreamMessageWriter,
} from "vscode-jsonrpc/node";

import { TooldApi } from "../client-core";
import { resolveLaunch } from "../launch";
import { buildInitializationOptions, DEFAULT_SETTINGS, type TooldSettings } from "../protocol";

export const TIMEOUT_MS = 30_000;
/** Cold starts on a loaded CI machine can be slow; initialize gets more room. */
const INITIALIZE_TIMEOUT_MS = 60_000;

export interface StartOptions {
  settings?: Partial<TooldSettings>;
  /** Client capabilities sent in initialize (default: none). */
  capabilities?: Record<string, unknown>;
  /** Called before initialize, to register handlers the daemon may need at once. */
  beforeInitialize?: (connection: MessageConnection) => void;
  /** The daemon's environment (default: this process's). */
  env?: NodeJS.ProcessEnv;
}

export interface Daemon {
  connection: MessageConnection;
  api: TooldApi;
  workspace: string;
  initializeResult: Record<string, unknown>;
  stderr(): string;
  close(): Promise<number | null>;
}

/** The settings a test daemon starts with: the environment picks toold. */
export function testSettings(overrides: Partial<TooldSettings> = {}): TooldSettings {
  return {
    ...DEFAULT_SETTINGS,
    path: process.env.TOOLD_PATH ?? "",
    pythonPath: process.env.TOOLD_PYTHON ?? "",
    ...overrides,
  };
}

function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve(child.exitCode);
  }
  return new Promise((resolve) => {
    child.once("exit", (code) => {
      resolve(code);
    });
  });
}

/** Spawn a daemon for a fresh temporary workspace and initialize it. */
export async function startDaemon(options: StartOptions = {}): Promise<Daemon> {
  const workspace = mkdtempSync(path.join(os.tmpdir(), "toold-vscode-"));
  const settings = testSettings(options.settings);
  const launch = await resolveLaunch(settings, { env: process.env, workspace });
  const child = spawn(launch.command, launch.args, {
    cwd: workspace,
    env: options.env ?? process.env,
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (chunk: string) => {
    stderr += chunk;
  });
  const connection = createMessageConnection(
    new StreamMessageReader(child.stdout),
    new StreamMessageWriter(child.stdin),
  );
  options.beforeInitialize?.(connection);
  connection.listen();
  const initializeResult = await withTimeout(
    connection.sendRequest<Record<string, unknown>>("initialize", {
      processId: process.pid,
      clientInfo: { name: "toold-vscode-tests" },
      rootUri: pathToFileURL(workspace).href,
      workspaceFolders: [{ uri: pathToFileURL(workspace).href, name: "ws" }],
      capabilities: options.capabilities ?? {},
      initializationOptions: buildInitializationOptions(workspace, settings),
    }),
    () => `initialize (stderr: ${stderr})`,
    INITIALIZE_TIMEOUT_MS,
  );
  await connection.sendNotification("initialized", {});
  return {
    connection,
    api: new TooldApi(connection),
    workspace,
    initializeResult,
    stderr: () => stderr,
    close: async () => {
      try {
        await withTimeout(connection.sendRequest("shutdown"), "shutdown", 5000);
        await connection.sendNotification("exit");
      } catch {
        child.kill("SIGKILL");
      }
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      const code = await exited(child);
      clearTimeout(timer);
      connection.dispose();
      rmSync(workspace, { recursive: true, force: true });
      return code;
    },
  };
}

/** `promise`, or a rejection naming `what` after `ms`. */
export async function withTimeout<T>(
  promise: Promise<T>,
  what: string | (() => string),
  ms = TIMEOUT_MS,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const text = typeof what === "string" ? what : what();
      reject(new Error(`timed out after ${String(ms)} ms waiting for ${text}`));
    }, ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The first value `subscribe` delivers that satisfies `match` (no fixed sleeps). */
export function nextEvent<T>(
  subscribe: (listener: (value: T) => void) => Disposable,
  what: string,
  match: (value: T) => boolean = () => true,
): Promise<T> {
  let sub: Disposable | undefined;
  const promise = new Promise<T>((resolve) => {
    sub = subscribe((value) => {
      if (match(value)) resolve(value);
    });
  });
  return withTimeout(promise, what).finally(() => sub?.dispose());
}
