// Checkpoints as the extension shows them, free of the `vscode` API: the list newest
// first, one line per checkpoint, and what a restore's answer or error means.

import { ResponseError } from "vscode-jsonrpc";

import { type CheckpointInfo, type CheckpointsRestoreResult, ERROR_CODES } from "./protocol";

/** The button of the Conflict dialog that repeats the restore with `force`. */
export const RESTORE_ANYWAY = "Restore anyway";

/** checkpoints/list answers oldest first; the view and the pickers show newest first. */
export function newestFirst(checkpoints: CheckpointInfo[]): CheckpointInfo[] {
  return [...checkpoints].reverse();
}

/** An ISO time as the local clock time (the date too when it is not today). */
export function timeLabel(iso: string, now: Date = new Date()): string {
  const when = new Date(iso);
  if (Number.isNaN(when.getTime())) return iso;
  const time = when.toLocaleTimeString(undefined, { hour12: false });
  return when.toDateString() === now.toDateString() ? time : `${when.toLocaleDateString()} ${time}`;
}

export interface CheckpointRow {
  label: string;
  description: string;
  tooltip: string;
  /** A codicon name. */
  icon: string;
  /** The tree item's contextValue: which actions its menu offers. */
  context: "checkpoint" | "checkpoint.undone";
}

/** One checkpoint as a tree row: "tool: paths", then time, origin, and whether it is undone. */
export function checkpointRow(checkpoint: CheckpointInfo, now?: Date): CheckpointRow {
  const undone = checkpoint.undone === true;
  const restore = checkpoint.restores !== undefined && checkpoint.restores !== null;
  const parts = [timeLabel(checkpoint.time, now), checkpoint.origin];
  if (undone) parts.unshift("undone"); // first: the row's description is often cut short
  const tooltip = [
    `${checkpoint.tool} by the ${checkpoint.origin} at ${checkpoint.time} (checkpoint ${checkpoint.id})`,
    ...checkpoint.paths.map((p) => `  ${p}`),
  ];
  if (restore) tooltip.push(`went back before checkpoint ${String(checkpoint.restores)}`);
  if (undone) tooltip.push("undone by a later restore");
  return {
    label: `${checkpoint.tool}: ${checkpoint.paths.join(", ")}`,
    description: parts.join(" · "),
    tooltip: tooltip.join("\n"),
    icon: undone ? "discard" : restore ? "history" : "edit",
    context: undone ? "checkpoint.undone" : "checkpoint",
  };
}

/** The files a Conflict (-33003) names as changed outside toold; undefined for other errors. */
export function conflictPaths(error: unknown): string[] | undefined {
  if (!(error instanceof ResponseError) || error.code !== ERROR_CODES.Conflict) return undefined;
  const data: unknown = error.data;
  if (typeof data !== "object" || data === null || !("paths" in data)) return [];
  return Array.isArray(data.paths) ? data.paths.map(String) : [];
}

/** True when the daemon answered NotFound (-33002): nothing to undo, or no such checkpoint. */
export function isNotFound(error: unknown): boolean {
  return error instanceof ResponseError && error.code === ERROR_CODES.NotFound;
}

/** The Conflict dialog's question. */
export function conflictQuestion(paths: string[]): string {
  const files = paths.length > 0 ? paths.join(", ") : "some files";
  return (
    `toold: ${files} changed outside toold since toold last wrote ${paths.length === 1 ? "it" : "them"}. ` +
    "Restoring puts back the old text and loses those changes."
  );
}

/** What a restore did, for a notification: the call undone and the files put back. */
export function restoredMessage(
  result: CheckpointsRestoreResult,
  undone: CheckpointInfo | undefined,
): string {
  const what =
    undone === undefined
      ? `checkpoint ${result.checkpoint.restores ?? ""}`
      : `${undone.tool} (${undone.origin}, ${timeLabel(undone.time)})`;
  const files = result.restored.length > 0 ? result.restored.join(", ") : "no files";
  return `toold: undid ${what}: restored ${files}.`;
}
