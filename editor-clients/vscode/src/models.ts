// What the extension shows, free of the `vscode` API: tool results and jobs as text, the
// jobs model behind the status bar, and the nodes of the Todos and Tasks trees.

import type {
  JobDetail,
  JobFinished,
  JobInfo,
  Task,
  TeamMessage,
  TodoItem,
  ToolsCallResult,
} from "./protocol";

// -- results --------------------------------------------------------------------------

export interface RenderedResult {
  text: string;
  language: "json" | "plaintext";
}

/** A tool result as text: strings as they are, lists of strings as lines, else indented JSON. */
export function renderResult(result: ToolsCallResult): RenderedResult {
  const content = result.content;
  if (typeof content === "string") {
    return { text: content, language: "plaintext" };
  }
  if (Array.isArray(content) && content.every((line) => typeof line === "string")) {
    return { text: content.join("\n"), language: "plaintext" };
  }
  return { text: JSON.stringify(content, null, 2), language: "json" };
}

/** A one-line summary of a tool result for a notification. */
export function summarizeResult(tool: string, result: ToolsCallResult): string {
  const first = renderResult(result).text.split("\n", 1)[0] ?? "";
  const short = first.length > 120 ? `${first.slice(0, 117)}…` : first;
  const exit =
    result.exitCode !== undefined && result.exitCode !== null
      ? ` (exit ${String(result.exitCode)})`
      : "";
  return result.isError === true ? `${tool} failed${exit}: ${short}` : `${tool}${exit}: ${short}`;
}

// -- jobs -----------------------------------------------------------------------------

export const JOB_ICONS: Record<JobInfo["status"], string> = {
  running: "sync~spin",
  done: "pass",
  failed: "error",
  cancelled: "circle-slash",
  timed_out: "watch",
};

/** The jobs the daemon knows, kept current from jobs/list and jobs/finished. */
export class JobsModel {
  private jobs = new Map<string, JobInfo>();

  /** Replace everything with a jobs/list answer. */
  reset(jobs: JobInfo[]): void {
    this.jobs = new Map(jobs.map((j) => [j.jobId, j]));
  }

  /** A job ended (jobs/finished). */
  finished(event: JobFinished): void {
    this.jobs.set(event.jobId, { ...this.jobs.get(event.jobId), ...event });
  }

  get running(): number {
    return [...this.jobs.values()].filter((j) => j.status === "running").length;
  }

  /** Running jobs first, then the most recent. */
  list(): JobInfo[] {
    return [...this.jobs.values()].sort((a, b) => {
      const run = Number(b.status === "running") - Number(a.status === "running");
      return run !== 0 ? run : b.startedAt.localeCompare(a.startedAt);
    });
  }
}

/** The notification text for a finished job, and whether it is bad news. */
export function jobFinishedMessage(event: JobFinished): { text: string; ok: boolean } {
  const ok = event.status === "done";
  const what = ok ? "finished" : event.status.replace("_", " ");
  const exit =
    event.exitCode !== undefined && event.exitCode !== null
      ? ` (exit ${String(event.exitCode)})`
      : "";
  const detail = ok ? "" : event.error ? `: ${event.error}` : "";
  return { text: `toold: job ${event.jobId} \`${event.command}\` ${what}${exit}${detail}`, ok };
}

/** A finished or running job as text for an editor. */
export function renderJob(job: JobDetail): string {
  const lines = [
    `# job ${job.jobId}: ${job.command}`,
    `# status: ${job.status}${job.exitCode !== undefined && job.exitCode !== null ? `, exit ${String(job.exitCode)}` : ""}`,
    `# started: ${job.startedAt}${job.finishedAt ? `, finished: ${job.finishedAt}` : ""}`,
  ];
  if (job.error) {
    lines.push(`# error: ${job.error}`);
  }
  lines.push("", job.output ?? job.result ?? "");
  return lines.join("\n");
}

/** A team/message as one line for a notification: "Message from X: ...". */
export function teamMessageText(message: TeamMessage): string {
  const plain = ["message", "request", "response"].includes(message.type);
  const kind = plain ? "" : ` (${message.type})`;
  return `toold: Message from ${message.from}${kind}: ${message.content}`;
}

/** The agent's answer as a markdown document: the prompt, its tool calls, the final text. */
export function renderAgentAnswer(prompt: string, toolCalls: string[], text: string): string {
  const quoted = prompt
    .split("\n")
    .map((line) => `> ${line}`)
    .join("\n");
  const lines = ["# toold agent", "", quoted, ""];
  if (toolCalls.length > 0) {
    lines.push(`<details><summary>${String(toolCalls.length)} tool call(s)</summary>`, "");
    for (const call of toolCalls) {
      lines.push(`- \`${call.replace(/`/g, "'")}\``);
    }
    lines.push("", "</details>", "");
  }
  lines.push(text.trim() === "" ? "_(The agent gave no final text.)_" : text, "");
  return lines.join("\n");
}

// -- views ----------------------------------------------------------------------------

/** A node of the Todos or Tasks tree, independent of VS Code's TreeItem. */
export interface TreeNode {
  id: string;
  label: string;
  description: string;
  tooltip: string;
  /** A codicon name. */
  icon: string;
  children: TreeNode[];
}

const TODO_ICONS: Record<TodoItem["status"], string> = {
  pending: "circle-large-outline",
  in_progress: "sync",
  done: "pass-filled",
};

const TASK_ICONS: Record<Task["status"], string> = {
  pending: "circle-large-outline",
  in_progress: "sync",
  done: "pass-filled",
  failed: "error",
};

export function todoNodes(todos: TodoItem[]): TreeNode[] {
  return todos.map((todo) => {
    const status = todo.status.replace("_", " ");
    const priority = todo.priority && todo.priority !== "normal" ? ` · ${todo.priority}` : "";
    return {
      id: `todo:${todo.id}`,
      label: todo.task,
      description: `${status}${priority}`,
      tooltip: `${todo.id}: ${todo.task}\nstatus: ${status}\npriority: ${todo.priority ?? "normal"}`,
      icon: TODO_ICONS[todo.status],
      children: [],
    };
  });
}

/** Tasks with their status; each task's dependencies are its children. */
export function taskNodes(tasks: Task[]): TreeNode[] {
  const byId = new Map(tasks.map((t) => [t.id, t]));
  return tasks.map((task) => {
    const deps = task.dependsOn ?? [];
    const status = task.status.replace("_", " ");
    const ready = task.ready === true ? " · ready" : "";
    const waiting = deps.filter((d) => byId.get(d)?.status !== "done");
    const blocked =
      task.status === "pending" && waiting.length > 0
        ? ` · waits on ${String(waiting.length)}`
        : "";
    const children = deps.map((dep): TreeNode => {
      const other = byId.get(dep);
      return {
        id: `task:${task.id}:dep:${dep}`,
        label: other ? other.title : dep,
        description: other
          ? `depends on · ${other.status.replace("_", " ")}`
          : "depends on · unknown task",
        tooltip: `${task.title} depends on ${dep}${other ? ` (${other.title})` : ""}`,
        icon: other ? TASK_ICONS[other.status] : "question",
        children: [],
      };
    });
    const tooltipLines = [`${task.id}: ${task.title}`, `status: ${status}`];
    if (task.description) tooltipLines.push(task.description);
    if (deps.length > 0) tooltipLines.push(`depends on: ${deps.join(", ")}`);
    return {
      id: `task:${task.id}`,
      label: task.title,
      description: `${status}${ready}${blocked}`,
      tooltip: tooltipLines.join("\n"),
      icon: TASK_ICONS[task.status],
      children,
    };
  });
}

// -- status bar -----------------------------------------------------------------------

export type DaemonState = "starting" | "running" | "stopped" | "failed";

/** The status bar's text and tooltip for the daemon's state. */
export function statusText(
  state: DaemonState,
  runningJobs: number,
  mode: string | undefined,
): { text: string; tooltip: string } {
  const icons: Record<DaemonState, string> = {
    starting: "$(sync~spin)",
    running: "$(tools)",
    stopped: "$(circle-slash)",
    failed: "$(error)",
  };
  const jobs = runningJobs > 0 ? ` $(loading~spin) ${String(runningJobs)}` : "";
  const tooltipParts = [`toold: ${state}`];
  if (mode !== undefined) tooltipParts.push(`permission mode: ${mode}`);
  tooltipParts.push(
    runningJobs === 1
      ? "1 background job running"
      : `${String(runningJobs)} background jobs running`,
  );
  return { text: `${icons[state]} toold${jobs}`, tooltip: tooltipParts.join("\n") };
}
