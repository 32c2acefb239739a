// How to start `toold serve`, in this order: the `toold.path` / `toold.pythonPath` settings,
// the interpreter selected in the Python extension, the workspace's `.venv` or `venv`, PATH.
// Free of the `vscode` API (the Python extension is asked through an injected lookup), so the
// tests launch the daemon through exactly this code and can fake each step of the order.

import { execFile } from "node:child_process";
import { constants, promises as fs } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

import type { TooldSettings } from "./protocol";

export const INSTALL_COMMAND = "pip install toold";
export const INSTALL_FROM_CHECKOUT = "pip install -e <path to the toold repository>";
/** The workspace folders where Python users keep their project's virtualenv. */
export const WORKSPACE_VENVS = [".venv", "venv"];

/** Which step of the order found toold. */
export type LaunchSource =
  "toold.path" | "toold.pythonPath" | "python extension" | "venv" | "VIRTUAL_ENV" | "PATH";

export interface LaunchSpec {
  command: string;
  args: string[];
  source: LaunchSource;
  /** What was found, for the log. */
  description: string;
}

/** The Python extension's selected interpreter, or why there is none ("not installed"). */
export type InterpreterLookup = { python: string } | { missing: string };

/** The outside world resolveLaunch looks at, injectable so each step can be faked in tests. */
export interface LaunchLookups {
  /** Whether `file` is an executable regular file. */
  isExecutable: (file: string) => Promise<boolean>;
  /** Why `python` cannot import toold (its last line of stderr), or undefined when it can. */
  cannotImportToold: (python: string) => Promise<string | undefined>;
  /** The interpreter selected in the Python extension for the workspace. */
  selectedInterpreter: () => Promise<InterpreterLookup>;
}

export interface LaunchContext {
  env: NodeJS.ProcessEnv;
  /** The workspace folder, for `${workspaceFolder}` in the path settings and its virtualenvs. */
  workspace?: string | undefined;
  platform?: NodeJS.Platform;
  /** Overrides of the real lookups (the file system, a Python probe, no Python extension). */
  lookups?: Partial<LaunchLookups>;
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

function cannotImportToold(python: string, env: NodeJS.ProcessEnv): Promise<string | undefined> {
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
          const last = lines[lines.length - 1];
          resolve(last !== undefined && last !== "" ? last : error.message);
        }
      },
    );
  });
}

function lookupsOf(ctx: LaunchContext): LaunchLookups {
  return {
    isExecutable,
    cannotImportToold: (python) => cannotImportToold(python, ctx.env),
    selectedInterpreter: () => Promise.resolve({ missing: "not installed" }),
    ...ctx.lookups,
  };
}

/** The first executable `name` on PATH (with PATHEXT on Windows), or undefined. */
export async function which(name: string, ctx: LaunchContext): Promise<string | undefined> {
  const executable = lookupsOf(ctx).isExecutable;
  if (name.includes("/") || name.includes("\\")) {
    return (await executable(name)) ? name : undefined;
  }
  const platform = ctx.platform ?? process.platform;
  const pathOf = platform === "win32" ? path.win32 : path.posix;
  const delimiter = platform === "win32" ? ";" : ":";
  const dirs = (ctx.env.PATH ?? ctx.env.Path ?? "").split(delimiter).filter(Boolean);
  const exts = platform === "win32" ? (ctx.env.PATHEXT ?? ".EXE;.CMD;.BAT;.COM").split(";") : [""];
  for (const dir of dirs) {
    for (const ext of exts) {
      const candidate = pathOf.join(dir, name + ext);
      if (await executable(candidate)) {
        return candidate;
      }
    }
  }
  return undefined;
}

/** `<workspace>/.venv/bin/toold` and `<workspace>/venv/bin/toold` (Scripts\toold.exe on Windows). */
export function workspaceVenvCandidates(
  workspace: string,
  platform: NodeJS.Platform,
): { venv: string; file: string }[] {
  const pathOf = platform === "win32" ? path.win32 : path.posix;
  return WORKSPACE_VENVS.map((venv) => ({
    venv,
    file: venvToold(pathOf.join(workspace, venv), platform),
  }));
}

/** A virtualenv's toold: `bin/toold`, or `Scripts\toold.exe` on Windows. */
function venvToold(venv: string, platform: NodeJS.Platform): string {
  return platform === "win32"
    ? path.win32.join(venv, "Scripts", "toold.exe")
    : path.posix.join(venv, "bin", "toold");
}

function serveArgs(settings: TooldSettings): string[] {
  return ["serve", "--log-level", settings.logLevel || "info"];
}

/** `python -P -m toold serve`: -P keeps the cwd (a workspace holding toold/) off sys.path. */
function pythonLaunch(
  python: string,
  settings: TooldSettings,
  source: LaunchSource,
  label: string,
): LaunchSpec {
  return {
    command: python,
    args: ["-P", "-m", "toold", ...serveArgs(settings)],
    source,
    description: `${python} -P -m toold (${label})`,
  };
}

/**
 * The command that starts the daemon: `toold.path`, else `toold.pythonPath -m toold`, else
 * the Python extension's interpreter when it can import toold, else the workspace's
 * `.venv`/`venv` toold, else `toold` from PATH ($VIRTUAL_ENV's first). A setting that is set but wrong is an error
 * of its own; otherwise the LaunchError names every place that was tried.
 */
export async function resolveLaunch(
  settings: TooldSettings,
  ctx: LaunchContext,
): Promise<LaunchSpec> {
  const lookups = lookupsOf(ctx);
  const platform = ctx.platform ?? process.platform;
  if (settings.path.trim() !== "") {
    const found = await which(expandPath(settings.path, ctx), ctx);
    if (found === undefined) {
      throw new LaunchError(`toold.path is "${settings.path}", which is not an executable file.`);
    }
    return {
      command: found,
      args: serveArgs(settings),
      source: "toold.path",
      description: `${found} (toold.path)`,
    };
  }
  if (settings.pythonPath.trim() !== "") {
    const python = await which(expandPath(settings.pythonPath, ctx), ctx);
    if (python === undefined) {
      throw new LaunchError(
        `toold.pythonPath is "${settings.pythonPath}", which is not an executable file.`,
      );
    }
    const problem = await lookups.cannotImportToold(python);
    if (problem !== undefined) {
      throw new LaunchError(`${python} cannot import toold (${problem}).`);
    }
    return pythonLaunch(python, settings, "toold.pythonPath", "toold.pythonPath");
  }
  const tried = ["toold.path (unset)", "toold.pythonPath (unset)"];
  const selected = await lookups.selectedInterpreter();
  if ("python" in selected) {
    const problem = await lookups.cannotImportToold(selected.python);
    if (problem === undefined) {
      const label = "the Python extension's interpreter";
      return pythonLaunch(selected.python, settings, "python extension", label);
    }
    tried.push(`the Python extension's interpreter (${selected.python} cannot import toold)`);
  } else {
    tried.push(`the Python extension's interpreter (${selected.missing})`);
  }
  if (ctx.workspace !== undefined) {
    for (const { venv, file } of workspaceVenvCandidates(ctx.workspace, platform)) {
      if (await lookups.isExecutable(file)) {
        const description = `${file} (the workspace's ${venv})`;
        return { command: file, args: serveArgs(settings), source: "venv", description };
      }
      tried.push(file);
    }
  }
  // VS Code (and code-server) take PATH from a login shell when not started by `code`: the
  // activated virtualenv's bin/ is gone from it, but VIRTUAL_ENV is still set.
  const active = ctx.env.VIRTUAL_ENV?.trim();
  if (active) {
    const file = venvToold(active, platform);
    if (await lookups.isExecutable(file)) {
      const description = `${file} (the activated virtualenv, $VIRTUAL_ENV)`;
      return { command: file, args: serveArgs(settings), source: "VIRTUAL_ENV", description };
    }
    tried.push(file);
  }
  const found = await which("toold", ctx);
  if (found !== undefined) {
    return {
      command: found,
      args: serveArgs(settings),
      source: "PATH",
      description: `${found} (PATH)`,
    };
  }
  tried.push("PATH");
  throw new LaunchError(`toold was not found: tried ${tried.join(", ")}.`);
}
