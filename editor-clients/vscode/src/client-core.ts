// The extension's protocol logic, free of the `vscode` API: typed request wrappers,
// notification fan-out, cancellable progress, and answering the permission prompt.
// It talks to anything shaped like a JSON-RPC endpoint: vscode-languageclient's
// LanguageClient in the editor, a vscode-jsonrpc MessageConnection in the tests.

import {
  type CancellationToken,
  type Disposable,
  type GenericNotificationHandler,
  type GenericRequestHandler,
  ProgressType,
  ResponseError,
} from "vscode-jsonrpc";

import {
  type CheckpointInfo,
  type CheckpointsRestoreResult,
  ERROR_CODES,
  type JobDetail,
  type JobInfo,
  type NativeTool,
  type NotificationTypes,
  PERMISSION_ACTIONS,
  type PermissionMode,
  type RequestTypes,
  type ShowMessageRequestParams,
  type Task,
  type TodoItem,
  type ToolsCallResult,
  type WorkDoneProgressValue,
} from "./protocol";

/** What the core needs from a JSON-RPC connection (LanguageClient and MessageConnection both fit). */
export interface Endpoint {
  sendRequest<R>(method: string, params: unknown, token?: CancellationToken): Promise<R>;
  sendNotification(method: string, params: unknown): Promise<void>;
  onNotification(method: string, handler: GenericNotificationHandler): Disposable;
  onRequest<R, E>(method: string, handler: GenericRequestHandler<R, E>): Disposable;
  onProgress<P>(
    type: ProgressType<P>,
    token: string | number,
    handler: (params: P) => void,
  ): Disposable;
}

export type RequestMethod = keyof RequestTypes;
export type NotificationMethod = keyof NotificationTypes;
type Params<M extends RequestMethod> = RequestTypes[M]["params"];
type Result<M extends RequestMethod> = RequestTypes[M]["result"];

const WORK_DONE_PROGRESS = new ProgressType<WorkDoneProgressValue>();
let tokenCounter = 0;

function newProgressToken(): string {
  tokenCounter += 1;
  return `toold-${String(process.pid)}-${String(Date.now())}-${String(tokenCounter)}`;
}

export interface ProgressOptions {
  /** Cancelling it sends $/cancelRequest (and window/workDoneProgress/cancel). */
  token?: CancellationToken;
  /** Receives the request's $/progress values (begin, report, end). */
  onProgress?: (value: WorkDoneProgressValue) => void;
}

export interface CallOptions extends ProgressOptions {
  /** Who decided the call; palette commands are "user". */
  origin?: "user" | "agent";
}

/** Typed access to toold's custom methods. */
export class TooldApi {
  /** Listeners per notification: a JSON-RPC connection keeps one handler per method. */
  private readonly listeners = new Map<string, Set<(params: unknown) => void>>();

  constructor(private readonly endpoint: Endpoint) {}

  /** Any request of the contract, typed by its method name. */
  request<M extends RequestMethod>(
    method: M,
    params: Params<M>,
    token?: CancellationToken,
  ): Promise<Result<M>> {
    // Never pass an undefined token: vscode-jsonrpc would send [params, null] by position.
    return token === undefined
      ? this.endpoint.sendRequest<Result<M>>(method, params)
      : this.endpoint.sendRequest<Result<M>>(method, params, token);
  }

  /** Subscribe to one of the daemon's notifications. */
  onNotification<M extends NotificationMethod>(
    method: M,
    handler: (params: NotificationTypes[M]) => void,
  ): Disposable {
    let set = this.listeners.get(method);
    if (set === undefined) {
      const listeners = new Set<(params: unknown) => void>();
      set = listeners;
      this.listeners.set(method, listeners);
      this.endpoint.onNotification(method, (params: unknown) => {
        for (const listener of [...listeners]) {
          listener(params);
        }
      });
    }
    const listeners = set;
    const listener = handler as (params: unknown) => void;
    listeners.add(listener);
    return {
      dispose: () => {
        listeners.delete(listener);
      },
    };
  }

  /** The catalogue in toold's native format. */
  async listTools(): Promise<NativeTool[]> {
    const result = await this.request("tools/list", { format: "native" });
    return result.tools as NativeTool[];
  }

  /** Run a tool; with onProgress the daemon reports $/progress on a fresh token. */
  callTool(
    name: string,
    args: Record<string, unknown>,
    options: CallOptions = {},
  ): Promise<ToolsCallResult> {
    const params: Params<"tools/call"> = {
      name,
      arguments: args,
      origin: options.origin ?? "user",
    };
    return this.requestWithProgress("tools/call", params, options);
  }

  /** agent/run: the agent works on `prompt`; each of its tool calls is a progress report. */
  async runAgent(prompt: string, options: ProgressOptions = {}): Promise<string> {
    const result = await this.requestWithProgress("agent/run", { prompt }, options);
    return result.text;
  }

  /**
   * A request that may take long: with onProgress it carries a fresh workDoneToken whose
   * $/progress values reach onProgress; cancelling `token` sends $/cancelRequest and
   * window/workDoneProgress/cancel for that token.
   */
  private async requestWithProgress<M extends "tools/call" | "agent/run">(
    method: M,
    params: Params<M>,
    options: ProgressOptions,
  ): Promise<Result<M>> {
    const disposables: Disposable[] = [];
    const { onProgress, token } = options;
    if (onProgress !== undefined) {
      const progressToken = newProgressToken();
      params.workDoneToken = progressToken;
      disposables.push(this.endpoint.onProgress(WORK_DONE_PROGRESS, progressToken, onProgress));
      if (token !== undefined) {
        disposables.push(
          token.onCancellationRequested(() => {
            this.endpoint
              .sendNotification("window/workDoneProgress/cancel", { token: progressToken })
              .catch(() => undefined);
          }),
        );
      }
    }
    try {
      return await this.request(method, params, token);
    } finally {
      for (const d of disposables) {
        d.dispose();
      }
    }
  }

  listJobs(): Promise<JobInfo[]> {
    return this.request("jobs/list", {}).then((r) => r.jobs);
  }

  getJob(jobId: string): Promise<JobDetail> {
    return this.request("jobs/get", { jobId });
  }

  cancelJob(jobId: string): Promise<JobInfo> {
    return this.request("jobs/cancel", { jobId });
  }

  async setMode(mode: PermissionMode): Promise<PermissionMode> {
    return (await this.request("permissions/setMode", { mode })).mode;
  }

  listTodos(): Promise<TodoItem[]> {
    return this.request("todos/list", {}).then((r) => r.todos);
  }

  listTasks(): Promise<Task[]> {
    return this.request("tasks/list", {}).then((r) => r.tasks);
  }

  /** checkpoints/list: the recorded file-changing calls, oldest first. */
  listCheckpoints(): Promise<CheckpointInfo[]> {
    return this.request("checkpoints/list", {}).then((r) => r.checkpoints);
  }

  /** checkpoints/diff: the unified diff from before that call to now. */
  checkpointDiff(id: string): Promise<string> {
    return this.request("checkpoints/diff", { id }).then((r) => r.diff);
  }

  /** checkpoints/restore: undo the last call (no id) or go back before `id`. */
  restoreCheckpoint(id?: string, force = false): Promise<CheckpointsRestoreResult> {
    const params: Params<"checkpoints/restore"> = {};
    if (id !== undefined) params.id = id;
    if (force) params.force = true;
    return this.request("checkpoints/restore", params);
  }
}

const CODE_NAMES = new Map<number, string>(
  Object.entries(ERROR_CODES).map(([name, code]) => [code, name]),
);

/** A readable message for a failed request (with the contract's error name). */
export function describeError(error: unknown): string {
  if (error instanceof ResponseError) {
    const name = CODE_NAMES.get(error.code) ?? `code ${String(error.code)}`;
    return `${error.message} (${name})`;
  }
  return error instanceof Error ? error.message : String(error);
}

/**
 * When agent/run failed because no model provider is configured (its error's
 * `data.apiKeyEnv` names the variable the daemon looked in), the fix to show the user;
 * otherwise undefined.
 */
export function agentUnavailableFix(error: unknown): string | undefined {
  if (!(error instanceof ResponseError) || error.code !== ERROR_CODES.InvalidRequest) {
    return undefined;
  }
  const data: unknown = error.data;
  if (typeof data !== "object" || data === null || !("apiKeyEnv" in data)) return undefined;
  const variable = typeof data.apiKeyEnv === "string" ? data.apiKeyEnv : "ANTHROPIC_API_KEY";
  return (
    `toold: the agent has no API key (${variable} is not set). Set ${variable} in the ` +
    "environment VS Code starts toold with (start VS Code from a shell that exports it), or " +
    "name the variable that holds your key in toold.toml: [agent] api_key_env = " +
    '"MY_KEY" ([agent] base_url for another endpoint). Then run "toold: Restart Daemon".'
  );
}

/** True when a request failed because it was cancelled. */
export function isCancelled(error: unknown): boolean {
  return error instanceof ResponseError && error.code === ERROR_CODES.RequestCancelled;
}

// -- permissions ----------------------------------------------------------------------

/** Shows the question with its action titles; resolves to the chosen title or undefined. */
export type Chooser = (
  message: string,
  titles: string[],
  isPermission: boolean,
) => Promise<string | undefined>;

/** True when a window/showMessageRequest is toold's Allow / Always allow / Deny prompt. */
export function isPermissionRequest(params: ShowMessageRequestParams): boolean {
  const titles = (params.actions ?? []).map((a) => a.title);
  return PERMISSION_ACTIONS.every((t) => titles.includes(t));
}

/** Answer a window/showMessageRequest through `choose`; null (no choice) denies. */
export async function answerShowMessageRequest(
  params: ShowMessageRequestParams,
  choose: Chooser,
): Promise<{ title: string } | null> {
  const actions = params.actions ?? [];
  const title = await choose(
    params.message,
    actions.map((a) => a.title),
    isPermissionRequest(params),
  );
  return actions.find((a) => a.title === title) ?? null;
}

/** Route the daemon's window/showMessageRequest to `choose`. */
export function handlePermissionRequests(endpoint: Endpoint, choose: Chooser): Disposable {
  return endpoint.onRequest("window/showMessageRequest", (params: ShowMessageRequestParams) =>
    answerShowMessageRequest(params, choose),
  );
}

/** Wire the notifications a client reacts to; returns one disposable for all. */
export function subscribe(
  api: TooldApi,
  handlers: { [M in NotificationMethod]?: (params: NotificationTypes[M]) => void },
): Disposable {
  const subs: Disposable[] = [];
  for (const method of Object.keys(handlers) as NotificationMethod[]) {
    const handler = handlers[method] as ((p: unknown) => void) | undefined;
    if (handler !== undefined) {
      subs.push(api.onNotification(method, handler));
    }
  }
  return {
    dispose: () => {
      for (const s of subs) s.dispose();
    },
  };
}
