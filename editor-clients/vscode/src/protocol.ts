// Wire contract v1 as the extension sees it: the generated types plus what schema.json
// does not describe (initializationOptions, the permission prompt, $/progress values).
// Nothing here imports `vscode`, so the tests run it from plain Node.

export * from "./generated/wire";

export type PermissionMode = "default" | "auto" | "plan" | "bypass";
export type ToolRunner = "auto" | "local" | "subprocess" | "bwrap" | "docker";

/** The setting value meaning "send nothing: toold.toml (or toold's default) decides". */
export const INHERIT = "inherit";

export const PERMISSION_MODES: readonly { mode: PermissionMode; detail: string }[] = [
  { mode: "default", detail: "Ask before writes, shell commands and other risky calls." },
  { mode: "auto", detail: "Allow shell commands that are not dangerous; still ask for writes." },
  { mode: "plan", detail: "Read-only: refuse every tool that is not safe." },
  { mode: "bypass", detail: "Never ask. Only for throwaway workspaces." },
];

export const TOOL_RUNNERS: readonly ToolRunner[] = [
  "auto",
  "local",
  "subprocess",
  "bwrap",
  "docker",
];

/** The titles toold offers in its window/showMessageRequest permission prompt. */
export const PERMISSION_ACTIONS = ["Allow", "Always allow", "Deny"] as const;
export type PermissionAction = (typeof PERMISSION_ACTIONS)[number];

/** `initialize`'s initializationOptions (toold's InitializationOptions model). */
export interface InitializationOptions {
  /** Workspace root, overriding workspaceFolders/rootUri/rootPath. */
  workspace?: string;
  /** toold.toml keys, overriding the file. */
  config?: Record<string, unknown>;
  /** Ask for execution/event notifications. */
  executionEvents?: boolean;
}

/** The extension's settings that shape the daemon (`toold.*`). */
export interface TooldSettings {
  /** toold executable; empty means "look for `toold` on PATH". */
  path: string;
  /** Python interpreter with toold installed (runs `python -m toold serve`). */
  pythonPath: string;
  permissionMode: PermissionMode | typeof INHERIT;
  toolRunner: ToolRunner | typeof INHERIT;
  executionEvents: boolean;
  logLevel: string;
}

export const DEFAULT_SETTINGS: TooldSettings = {
  path: "",
  pythonPath: "",
  permissionMode: INHERIT,
  toolRunner: INHERIT,
  executionEvents: false,
  logLevel: "info",
};

/** initializationOptions for one workspace: only the settings the user actually chose. */
export function buildInitializationOptions(
  workspace: string | undefined,
  settings: TooldSettings,
): InitializationOptions {
  const config: Record<string, Record<string, unknown>> = {};
  if (settings.permissionMode !== INHERIT) {
    config.permissions = { mode: settings.permissionMode };
  }
  if (settings.toolRunner !== INHERIT) {
    config.execution = { tool_runner: settings.toolRunner };
  }
  const options: InitializationOptions = {};
  if (workspace !== undefined) {
    options.workspace = workspace;
  }
  if (Object.keys(config).length > 0) {
    options.config = config;
  }
  if (settings.executionEvents) {
    options.executionEvents = true;
  }
  return options;
}

/** Values of `$/progress` for a work-done token (LSP's WorkDoneProgress). */
export interface WorkDoneProgressBegin {
  kind: "begin";
  title: string;
  cancellable?: boolean;
  message?: string;
  percentage?: number;
}
export interface WorkDoneProgressReport {
  kind: "report";
  cancellable?: boolean;
  message?: string;
  percentage?: number;
}
export interface WorkDoneProgressEnd {
  kind: "end";
  message?: string;
}
export type WorkDoneProgressValue =
  WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd;

/** window/showMessageRequest params (LSP). */
export interface ShowMessageRequestParams {
  type: number;
  message: string;
  actions?: { title: string }[];
}

/**
 * Declared in initialize's client capabilities: the daemon then sends
 * `permissions/preview` (PermissionsPreview) right before an edit's permission prompt,
 * instead of putting the diff in the prompt's text.
 */
export const PREVIEW_CAPABILITY = { toold: { diffPreview: true } } as const;
