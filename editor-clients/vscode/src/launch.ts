// How to start `toold serve`: from the settings, else from PATH, else a clear install hint.
// Free of the `vscode` API so the tests launch the daemon through exactly this code.

import { execFile } from "node:child_process";
import { constants, promises as fs } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

import type { TooldSettings } from "./protocol";

export const INSTALL_COMMAND = "pip install toold";
export const INSTALL_FROM_CHECKOUT = "pip install -e <path to the toold repository>";

export interface LaunchSpec {
  command: string;
  args: string[];
  /** What was found, for the log. */
  description: string;
}

export interface LaunchContext {
  env: NodeJS.ProcessEnv;
  /** The workspace folder, for `${workspaceFolder}` in the path settings. */
  workspace?: string | undefined;
  platform?: NodeJS.Platform;
}

/** toold could not be started; `message` says why and how to install it. */
export class LaunchError extends Error {
  constructor(reason: string) {
    super(
      `${reason} Install it with \`${INSTALL_COMMAND}\` (or \`${INSTALL_FROM_CHECKOUT}\` ` +
        "for a checkout), or point the `toold.path` or `toold.pythonPath` setting at it.",
    );
    this.name = "LaunchError";
  }
}

/** `~` and `${workspaceFolder}` expanded; relative paths are taken from the workspace. */
export function expandPath(value: string, ctx: LaunchContext): string {
  let out = value.trim();
  if (ctx.workspace !== undefined) {
    out = out.split("${workspaceFolder}").join(ctx.workspace);
  }
  if (out === "~" || out.startsWith("~/")) {
    out = path.join(os.homedir(), out.slice(1));
  }
  if (out.includes("/") || out.includes("\\")) {
    if (!path.isAbsolute(out) && ctx.workspace !== undefined) {
      out = path.resolve(ctx.workspace, out);
    }
  }
  return out;
}

async function isExecutable(file: string): Promise<boolean> {
  try {
    const stat = await fs.stat(file);
    if (!stat.isFile()) {
      return false;
    }
    await fs.access(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The first executable `name` on PATH (with PATHEXT on Windows), or undefined. */
export async function which(name: string, ctx: LaunchContext): Promise<string | undefined> {
  if (name.includes("/") || name.includes("\\")) {
    return (await isExecutable(name)) ? name : undefined;
  }
  const platform = ctx.platform ?? process.platform;
  const dirs = (ctx.env.PATH ?? ctx.env.Path ?? "").split(path.delimiter).filter(Boolean);
  const exts = platform === "win32" ? (ctx.env.PATHEXT ?? ".EXE;.CMD;.BAT;.COM").split(";") : [""];
  for (const dir of dirs) {
    for (const ext of exts) {
      const candidate = path.join(dir, name + ext);
      if (await isExecutable(candidate)) {
        return candidate;
      }
    }
  }
  return undefined;
}

function serveArgs(settings: TooldSettings): string[] {
  return ["serve", "--log-level", settings.logLevel || "info"];
}

function canImportToold(python: string, env: NodeJS.ProcessEnv): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile(
      python,
      ["-P", "-c", "import toold"], // -P: never the cwd's toold/
      { env, timeout: 20_000, windowsHide: true },
      (error, _stdout, stderr) => {
        if (error === null) {
          resolve(undefined);
        } else {
          const lines = stderr.trim().split("\n");
          resolve(lines[lines.length - 1] ?? error.message);
        }
      },
    );
  });
}

/**
 * The command that starts the daemon: `toold.path`, else `toold.pythonPath -m toold`,
 * else `toold` from PATH. Throws LaunchError (with the install command) when none works.
 */
export async function resolveLaunch(
  settings: TooldSettings,
  ctx: LaunchContext,
): Promise<LaunchSpec> {
  if (settings.path.trim() !== "") {
    const file = expandPath(settings.path, ctx);
    const found = await which(file, ctx);
    if (found === undefined) {
      throw new LaunchError(`toold.path is "${settings.path}", which is not an executable file.`);
    }
    return { command: found, args: serveArgs(settings), description: `${found} (toold.path)` };
  }
  if (settings.pythonPath.trim() !== "") {
    const given = expandPath(settings.pythonPath, ctx);
    const python = await which(given, ctx);
    if (python === undefined) {
      throw new LaunchError(
        `toold.pythonPath is "${settings.pythonPath}", which is not an executable file.`,
      );
    }
    const problem = await canImportToold(python, ctx.env);
    if (problem !== undefined) {
      throw new LaunchError(`${python} cannot import toold (${problem}).`);
    }
    return {
      command: python,
      // -P: the cwd (a workspace holding toold/ or logging.py) is never on sys.path.
      args: ["-P", "-m", "toold", ...serveArgs(settings)],
      description: `${python} -P -m toold (toold.pythonPath)`,
    };
  }
  const found = await which("toold", ctx);
  if (found === undefined) {
    throw new LaunchError("toold was not found on PATH.");
  }
  return { command: found, args: serveArgs(settings), description: `${found} (PATH)` };
}
