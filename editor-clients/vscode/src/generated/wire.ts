// Generated from protocol/schema.json by scripts/generate-protocol.mjs. Do not edit:
// run `npm run generate` after the contract changes (a test checks this file is current).

export const PROTOCOL_VERSION = "1";

/** Params of `agent/run`. */
export interface AgentRunParams {
  /** general-purpose (default), explore, plan or code-review. */
  agentType?: string | null;
  /** The task for the agent. */
  prompt: string;
  /** When given, each tool call is reported as `$/progress`. */
  workDoneToken?: number | string | null;
}

/** Result of `agent/run`. */
export interface AgentRunResult {
  /** The agent's final answer. */
  text: string;
  /** The run's tokens, its subagents' included. */
  usage?: TokenUsage | null;
}

/** A tool in the Anthropic Messages API format. */
export interface AnthropicTool {
  description: string;
  input_schema: JsonSchemaObject;
  name: string;
}

/** Params naming one checkpoint. */
export interface CheckpointIdParams {
  id: string;
}

/** One recorded tool call that changed files (`checkpoints/list`). */
export interface CheckpointInfo {
  id: string;
  origin: "agent" | "user";
  /** Workspace-relative files it changed. */
  paths: string[];
  /** For a restore's own checkpoint: the checkpoint it went back before. */
  restores?: string | null;
  time: string;
  /** The tool that made the change, or `restore` for a restore's own checkpoint. */
  tool: string;
  /**
   * For a shell call's checkpoint (bash, background_run, python_repl): what its undo does
   * not cover (ignored paths, files over limits.max_file_size, the tree past
   * checkpoints.max_entries); absent when it covers everything.
   */
  uncovered?: string | null;
  /** A later restore went back before it. */
  undone?: boolean;
}

/** Result of `checkpoints/diff`: from before that call (and every later one) to now. */
export interface CheckpointsDiffResult {
  /** A unified diff (`a/` and `b/` paths, `/dev/null` for a file that did not exist). */
  diff: string;
}

/** Result of `checkpoints/list`: oldest first. */
export interface CheckpointsListResult {
  checkpoints: CheckpointInfo[];
}

/** Params of `checkpoints/restore`. */
export interface CheckpointsRestoreParams {
  /** Restore even files changed outside toold since (their changes are lost). */
  force?: boolean;
  /** The checkpoint to go back before; the newest one an undo reaches when omitted. */
  id?: string | null;
}

/**
 * Result of `checkpoints/restore`: the files put back and the restore's own
 * checkpoint (restore it to redo).
 */
export interface CheckpointsRestoreResult {
  checkpoint: CheckpointInfo;
  /**
   * What the restore did to the restored files' diagnostics, as `tools/call`'s
   * `diagnostics` (within `diagnostics.wait_ms`); present only when there is
   * something in it.
   */
  diagnostics?: DiagnosticsDelta | null;
  restored: string[];
}

/** One problem a language server found in a file. */
export interface Diagnostic {
  /** The rule or error code, e.g. "F401". */
  code?: string | null;
  /** 1-based column of the start (UTF-16 code units, as LSP counts). */
  column: number;
  /** 1-based line of the start. */
  line: number;
  message: string;
  /** The file, relative to the workspace root ("/"-separated). */
  path: string;
  severity: "error" | "warning" | "information" | "hint";
  /** What reported it (the server's name for itself, e.g. "Ruff"). */
  source?: string | null;
}

/** `diagnostics/changed`: a file's diagnostics after a change toold saw. */
export interface DiagnosticsChanged {
  /** All of its diagnostics now (an empty list: none left). */
  diagnostics: Diagnostic[];
  /** The file, relative to the workspace root. */
  path: string;
}

/**
 * What a file-changing call did to its files' diagnostics (tools/call's
 * `diagnostics`): the new or changed ones listed, the ones already there counted.
 */
export interface DiagnosticsDelta {
  /** Diagnostics that were there before the call and are gone. */
  fixed?: Diagnostic[];
  /**
   * Language servers these files need that are not installed or do not start (each
   * named once per workspace).
   */
  missing?: string[];
  /** Diagnostics the call introduced (or changed: another message, code or severity). */
  new?: Diagnostic[];
  /**
   * Files whose servers did not answer within `diagnostics.wait_ms` (the next
   * diagnostics/changed or diagnostics/get has them).
   */
  pending?: string[];
  /** Diagnostics that were there before the call and still are (not repeated). */
  unchanged?: number;
}

/** Params of `diagnostics/get`. */
export interface DiagnosticsGetParams {
  /**
   * A file or folder (relative to the workspace, or absolute inside it); the whole
   * workspace when omitted.
   */
  path?: string | null;
}

/** Result of `diagnostics/get`: the current diagnostics, by file then position. */
export interface DiagnosticsGetResult {
  /** Files checked (a folder's are those its servers match, up to a cap). */
  checked?: number;
  diagnostics: Diagnostic[];
  /** Files whose servers did not answer in time. */
  pending?: string[];
}

/** Params of a method that takes none. */
export type EmptyParams = Record<string, never>;

/**
 * `execution/event`: a tool run's lifecycle.
 *
 * Sent only to clients whose initializationOptions set `executionEvents`.
 */
export interface ExecutionEvent {
  callId: string;
  durationMs?: number | null;
  error?: string | null;
  event: "execution.started" | "execution.completed" | "execution.failed";
  /** local, subprocess, bwrap or docker. */
  runner: string;
  tool: string;
}

/** Result of `jobs/get`: the record plus output so far. */
export interface JobDetail {
  command: string;
  /** What went wrong, for any other final status. */
  error?: string | null;
  exitCode?: number | null;
  finishedAt?: string | null;
  jobId: string;
  /** Output so far (head and tail kept when long). */
  output?: string;
  /** Output of a job that succeeded. */
  result?: string | null;
  startedAt: string;
  status: "running" | "done" | "failed" | "cancelled" | "timed_out";
}

/** `jobs/finished`: pushed when a background job ends. */
export interface JobFinished {
  command: string;
  error?: string | null;
  exitCode?: number | null;
  finishedAt: string;
  jobId: string;
  result?: string | null;
  startedAt: string;
  status: "done" | "failed" | "cancelled" | "timed_out";
}

/** Params naming one job. */
export interface JobIdParams {
  jobId: string;
}

/** A background job's record. */
export interface JobInfo {
  command: string;
  /** What went wrong, for any other final status. */
  error?: string | null;
  exitCode?: number | null;
  finishedAt?: string | null;
  jobId: string;
  /** Output of a job that succeeded. */
  result?: string | null;
  startedAt: string;
  status: "running" | "done" | "failed" | "cancelled" | "timed_out";
}

/** Result of `jobs/list`. */
export interface JobsListResult {
  jobs: JobInfo[];
}

/** A JSON Schema of type object, as models receive it. */
export interface JsonSchemaObject {
  properties?: Record<string, unknown>;
  required?: string[];
  type?: "object";
  [key: string]: unknown;
}

/** A tool in toold's native format. */
export interface NativeTool {
  /** Other names that resolve to this tool. */
  aliases?: string[];
  /** Behaviour and risk: MCP's hints (`readOnlyHint` ...) and the guard's treatment. */
  annotations?: ToolAnnotations;
  /** True for BareAgent's deferred tools (schema visible at once, runtime bound lazily). */
  deferred?: boolean;
  /** What the tool does, written for a model. */
  description: string;
  /** Side-effect labels such as `filesystem:write`. */
  effectTags?: string[];
  /** Canonical tool name. */
  name: string;
  /** Whether calls may run concurrently with other calls in one turn. */
  parallelSafe?: boolean;
  /** JSON Schema of the tool's arguments. */
  parameters: JsonSchemaObject;
}

/** The `function` member of an OpenAI chat tool. */
export interface OpenAIFunction {
  description: string;
  name: string;
  parameters: JsonSchemaObject;
}

/** A tool in the OpenAI chat-completions format. */
export interface OpenAITool {
  function: OpenAIFunction;
  type?: "function";
}

/**
 * `permissions/preview`: what the call the next permission prompt asks about would
 * change. Sent just before that `window/showMessageRequest`, only to clients that set
 * `initialize.capabilities.experimental.toold.diffPreview`; others get the diff
 * (capped) in the prompt's message.
 */
export interface PermissionsPreview {
  /** Unified diff (`a/`/`b/` labels, `/dev/null` for a missing side). */
  diff: string;
  /** The changed text files up to 1 MiB each (larger or binary ones: only in `diff`). */
  files: PreviewFile[];
  /** Why the guard asks (as in the prompt). */
  reason: string;
  tool: string;
}

/** One file a call would change, whole, for a diff editor. */
export interface PreviewFile {
  /** Its text after the call; null when the call deletes it. */
  modified: string | null;
  /** Its text now; null when the file does not exist yet. */
  original: string | null;
  /** Workspace-relative, `/` separated. */
  path: string;
}

/** Params of `permissions/setMode`. */
export interface SetModeParams {
  mode: "default" | "auto" | "plan" | "bypass";
}

/** Result of `permissions/setMode`: the mode now in force. */
export interface SetModeResult {
  mode: "default" | "auto" | "plan" | "bypass";
}

/** A skill folder holding SKILL.md. */
export interface Skill {
  /** First non-heading line of SKILL.md. */
  description: string;
  name: string;
  /** Absolute path of SKILL.md. */
  path: string;
}

/** `skills/changed`: the skills after a skill folder changed. */
export interface SkillsChanged {
  skills: Skill[];
}

/** Result of `skills/list`. */
export interface SkillsListResult {
  skills: Skill[];
}

/** A persistent task from `.tasks.json`. */
export interface Task {
  /** UTC ISO-8601. */
  createdAt: string;
  dependsOn?: string[];
  description?: string;
  /** Eight random alphanumerics. */
  id: string;
  /** Pending, with every dependency done. */
  ready?: boolean;
  status: "pending" | "in_progress" | "done" | "failed";
  title: string;
  updatedAt: string;
}

/** `tasks/changed`: every task after a change, made by toold or by anyone else. */
export interface TasksChanged {
  tasks: Task[];
}

/** Params of `tasks/list`. */
export interface TasksListParams {
  /** Only tasks with this status. */
  status?: "pending" | "in_progress" | "done" | "failed" | null;
}

/** Result of `tasks/list`. */
export interface TasksListResult {
  tasks: Task[];
}

/** One mailbox message. */
export interface TeamMessage {
  content: string;
  from: string;
  id: string;
  inReplyTo?: string | null;
  timestamp: string;
  to: string;
  /** request, response, broadcast, shutdown, ... */
  type: string;
  [key: string]: unknown;
}

/** `team/message`: a message addressed to the user's agent (`main`). */
export interface TeamMessageNotification {
  message: TeamMessage;
}

/** Params of `team/register`. */
export interface TeamRegisterParams {
  model?: string | null;
  /** Teammate name: letters, digits, _ and -. */
  name: string;
  role: string;
  systemPrompt?: string;
}

/** A registered teammate. */
export interface Teammate {
  name: string;
  providerConfig?: Record<string, unknown>;
  role: string;
  running?: boolean;
  systemPrompt?: string;
}

/** One item of the session's TODO list. */
export interface TodoItem {
  /** `t1`, `t2`, ... */
  id: string;
  priority?: string;
  status: "pending" | "in_progress" | "done";
  task: string;
}

/** `todos/changed`: the whole list after a change. */
export interface TodosChanged {
  todos: TodoItem[];
}

/** Result of `todos/list`. */
export interface TodosListResult {
  todos: TodoItem[];
}

/** Tokens a run used, as the Messages API reports them, summed over its responses. */
export interface TokenUsage {
  /** Input tokens read from the prompt cache. */
  cacheReadTokens?: number;
  /** Input tokens written to the prompt cache. */
  cacheWriteTokens?: number;
  /** Input tokens read without the prompt cache. */
  inputTokens?: number;
  /** Output tokens. */
  outputTokens?: number;
  /** The four above, added. */
  totalTokens?: number;
}

/** What a tool does (MCP's ToolAnnotations hints) and how toold's guard treats it. */
export interface ToolAnnotations {
  /**
   * When an agent's call asks the user: never (plan mode included), as the permission
   * mode and rules say, or always (even with an allow rule; bypass mode runs it).
   */
  confirm?: "never" | "ask" | "always";
  /** It may delete or overwrite (when not read-only). */
  destructiveHint?: boolean;
  /** Repeating a call with the same arguments changes nothing more. */
  idempotentHint?: boolean;
  /** It reaches beyond the workspace (the network, other processes). */
  openWorldHint?: boolean;
  /** It changes nothing in its environment. */
  readOnlyHint?: boolean;
  /** Its arguments are code it runs. */
  runsCode?: boolean;
  /** Its `file_path`/`path` argument names a file it writes. */
  writesPath?: boolean;
}

/** Params of `tools/call`. */
export interface ToolsCallParams {
  /** The tool's arguments, checked against its schema. */
  arguments?: Record<string, unknown>;
  /** Tool name or alias. */
  name: string;
  /** Who decided the call: `agent` (a model) or `user` (a person). */
  origin?: "agent" | "user";
  /** When given, the daemon reports `$/progress` begin/report/end on this token. */
  workDoneToken?: number | string | null;
}

/** Result of `tools/call`. */
export interface ToolsCallResult {
  /** The tool's return value as JSON: a string, a list or an object. */
  content: unknown;
  /**
   * How the call was decided, when not simply run: `allowed` (the user allowed it, now
   * or by an earlier "Always allow"), `denied_by_rule` (a forbid or deny rule, plan mode,
   * a hook, or nobody to ask), `denied_by_user` (the user said no, or did not answer),
   * `refused` (invalid arguments, a stale file, an invalid configuration, a command not
   * checked in time). Absent when the rules let it run without asking.
   */
  decision?: "allowed" | "denied_by_rule" | "denied_by_user" | "refused" | null;
  /**
   * For a file-changing call, the language servers' diagnostics it introduced or fixed
   * (`[diagnostics]` in toold.toml); absent when no server checks its files.
   */
  diagnostics?: DiagnosticsDelta | null;
  /** Exit status of the command, for tools that run one (bash, background jobs). */
  exitCode?: number | null;
  /** True when the call failed: bad arguments, a handler exception, a refusal. */
  isError?: boolean;
  /** The background job the call started (background_run): for jobs/get, jobs/cancel. */
  jobId?: string | null;
  /**
   * The text of the rule behind `decision` (a forbid or deny rule, or the "Always
   * allow" that let it run), when one was; absent with `decision`.
   */
  rule?: string | null;
}

/** Params of `tools/list`. */
export interface ToolsListParams {
  /** Schema flavour: `native` (default), `anthropic` or `openai`. */
  format?: "native" | "anthropic" | "openai";
}

/** Result of `tools/list`. */
export interface ToolsListResult {
  /** Every tool of the catalogue, in the requested format. */
  tools: (NativeTool | AnthropicTool | OpenAITool)[];
}

/** Requests a client sends, with their params and result types. */
export interface RequestTypes {
  /** Run the agent loop on a prompt; tool calls pass the permission guard. */
  "agent/run": { params: AgentRunParams; result: AgentRunResult };
  /** The unified diff from before a checkpoint's call (and every later one) to now. */
  "checkpoints/diff": { params: CheckpointIdParams; result: CheckpointsDiffResult };
  /** Every recorded file-changing tool call, oldest first. */
  "checkpoints/list": { params: EmptyParams; result: CheckpointsListResult };
  /** Put files back as they were before a checkpoint (Conflict if changed since). */
  "checkpoints/restore": { params: CheckpointsRestoreParams; result: CheckpointsRestoreResult };
  /** The language servers' current diagnostics of a file, a folder or the workspace. */
  "diagnostics/get": { params: DiagnosticsGetParams; result: DiagnosticsGetResult };
  /** Cancel a running job: its whole process group is killed. */
  "jobs/cancel": { params: JobIdParams; result: JobInfo };
  /** One job with its output so far (capped). */
  "jobs/get": { params: JobIdParams; result: JobDetail };
  /** Background jobs, running and finished (finished ones survive restarts). */
  "jobs/list": { params: EmptyParams; result: JobsListResult };
  /** Switch the permission mode for this daemon's life. */
  "permissions/setMode": { params: SetModeParams; result: SetModeResult };
  /** Skills found in BAREAGENT_SKILLS_DIR, .toold/skills and toold's own. */
  "skills/list": { params: EmptyParams; result: SkillsListResult };
  /** Persistent tasks from .tasks.json, each with its ready flag. */
  "tasks/list": { params: TasksListParams; result: TasksListResult };
  /** Register (or replace) a teammate in .team.json. */
  "team/register": { params: TeamRegisterParams; result: Teammate };
  /** The session's TODO items. */
  "todos/list": { params: EmptyParams; result: TodosListResult };
  /** Run one tool; failures of the tool itself come back as isError results. */
  "tools/call": { params: ToolsCallParams; result: ToolsCallResult };
  /** List every tool's schema in the requested format. */
  "tools/list": { params: ToolsListParams; result: ToolsListResult };
}

/** Notifications the daemon pushes, with their params types. */
export interface NotificationTypes {
  /** A file's diagnostics changed after a tool call wrote it. */
  "diagnostics/changed": DiagnosticsChanged;
  /** A tool run started, completed or failed (opt-in). */
  "execution/event": ExecutionEvent;
  /** A background job ended. */
  "jobs/finished": JobFinished;
  /** What the call of the permission prompt that follows would change (opt-in). */
  "permissions/preview": PermissionsPreview;
  /** A skill folder changed. */
  "skills/changed": SkillsChanged;
  /** Tasks changed (here or on disk). */
  "tasks/changed": TasksChanged;
  /** A teammate wrote to the user's agent (main). */
  "team/message": TeamMessageNotification;
  /** The TODO list changed. */
  "todos/changed": TodosChanged;
}

export const REQUESTS = [
  "agent/run",
  "checkpoints/diff",
  "checkpoints/list",
  "checkpoints/restore",
  "diagnostics/get",
  "jobs/cancel",
  "jobs/get",
  "jobs/list",
  "permissions/setMode",
  "skills/list",
  "tasks/list",
  "team/register",
  "todos/list",
  "tools/call",
  "tools/list",
] as const;

export const NOTIFICATIONS = [
  "diagnostics/changed",
  "execution/event",
  "jobs/finished",
  "permissions/preview",
  "skills/changed",
  "tasks/changed",
  "team/message",
  "todos/changed",
] as const;

export const ERROR_CODES = {
  Conflict: -33003,
  InternalError: -32603,
  InvalidParams: -32602,
  InvalidRequest: -32600,
  MessageTooLarge: -33001,
  MethodNotFound: -32601,
  NotFound: -33002,
  ParseError: -32700,
  RequestCancelled: -32800,
  ServerNotInitialized: -32002,
} as const;
