// The interpreter selected in the Python extension (ms-python.python), through its public
// environments API (the shape `@vscode/python-extension` publishes), when it is installed.

import * as vscode from "vscode";

import type { InterpreterLookup } from "./launch";

export const PYTHON_EXTENSION_ID = "ms-python.python";
/** The Python extension may still be discovering environments; toold does not wait longer. */
const ANSWER_MS = 15_000;

/** The parts of `@vscode/python-extension`'s `PythonExtension` toold uses. */
interface EnvironmentPath {
  readonly id: string;
  readonly path: string;
}

interface ResolvedEnvironment {
  readonly executable: { readonly uri: vscode.Uri | undefined };
}

interface PythonEnvironments {
  getActiveEnvironmentPath(resource?: vscode.Uri): EnvironmentPath;
  resolveEnvironment(
    environment: EnvironmentPath | string,
  ): Promise<ResolvedEnvironment | undefined>;
  readonly onDidChangeActiveEnvironmentPath?: vscode.Event<unknown>;
}

interface PythonExtensionApi {
  readonly ready?: Promise<void>;
  readonly environments?: PythonEnvironments;
}

function withDeadline<T>(work: Promise<T>, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`${what} did not answer within ${ANSWER_MS / 1000} s`));
    }, ANSWER_MS);
    work.then(resolve, reject).finally(() => {
      clearTimeout(timer);
    });
  });
}

async function environments(): Promise<PythonEnvironments | string> {
  // Exports may be undefined: an extension's exports are whatever its activate returned.
  const extension = vscode.extensions.getExtension<PythonExtensionApi | undefined>(
    PYTHON_EXTENSION_ID,
  );
  if (extension === undefined) {
    return "not installed";
  }
  const api = extension.isActive ? extension.exports : await extension.activate();
  if (api?.environments === undefined) {
    return "its environments API is missing: update the Python extension";
  }
  await api.ready;
  return api.environments;
}

/** The Python extension's interpreter for `folder`, or why there is none. */
export async function selectedInterpreter(folder: vscode.Uri): Promise<InterpreterLookup> {
  try {
    return await withDeadline(
      (async (): Promise<InterpreterLookup> => {
        const envs = await environments();
        if (typeof envs === "string") {
          return { missing: envs };
        }
        const active = envs.getActiveEnvironmentPath(folder);
        const resolved = await envs.resolveEnvironment(active);
        const python = resolved?.executable.uri?.fsPath;
        return python ? { python } : { missing: `no interpreter at ${active.path}` };
      })(),
      "the Python extension",
    );
  } catch (error) {
    return { missing: error instanceof Error ? error.message : String(error) };
  }
}

/** Calls `listener` when the user selects another interpreter (nothing without the extension). */
export async function onInterpreterChanged(listener: () => void): Promise<vscode.Disposable> {
  try {
    const envs = vscode.extensions.getExtension<PythonExtensionApi>(PYTHON_EXTENSION_ID)?.isActive
      ? await environments()
      : undefined;
    if (typeof envs === "object" && envs.onDidChangeActiveEnvironmentPath !== undefined) {
      return envs.onDidChangeActiveEnvironmentPath(listener);
    }
  } catch {
    // No change events from a broken Python extension: the launch order still asked it once.
  }
  return new vscode.Disposable(() => undefined);
}
