// What the agent's edits broke, as the Problems panel wants it: toold's wire diagnostics
// (from the language servers toold runs after a tool's write) mapped to VS Code's
// diagnostic shape. No `vscode` import: problems.ts puts these on a DiagnosticCollection
// (per file), and the tests run this module in plain Node.

import type { Diagnostic } from "./protocol";

/** VS Code's DiagnosticSeverity values (Error 0, Warning 1, Information 2, Hint 3). */
export const SEVERITY = { error: 0, warning: 1, information: 2, hint: 3 } as const;

/** The name of toold's diagnostic collection (and the prefix of every source). */
export const COLLECTION = "toold";

/** One problem in VS Code's terms: 0-based line and UTF-16 column, as `vscode.Position`. */
export interface Problem {
  line: number;
  column: number;
  severity: (typeof SEVERITY)[keyof typeof SEVERITY];
  message: string;
  /** "toold: Ruff": the server's own name, marked so it is told apart from the user's own. */
  source: string;
  code?: string;
}

/** The source shown in the Problems panel: `toold: <server>`. */
export function problemSource(diagnostic: Diagnostic): string {
  const server = diagnostic.source ?? "language server";
  return `${COLLECTION}: ${server}`;
}

/** A wire diagnostic (1-based line and column) as a Problem (0-based). */
export function toProblem(diagnostic: Diagnostic): Problem {
  const problem: Problem = {
    line: Math.max(0, diagnostic.line - 1),
    column: Math.max(0, diagnostic.column - 1),
    severity: SEVERITY[diagnostic.severity],
    message: diagnostic.message,
    source: problemSource(diagnostic),
  };
  if (diagnostic.code !== undefined && diagnostic.code !== null) problem.code = diagnostic.code;
  return problem;
}

/**
 * The absolute path of a wire path (relative to the workspace root, "/"-separated), so
 * a URI can be made of it; an absolute one is kept.
 */
export function absolutePath(root: string, wirePath: string): string {
  if (wirePath.startsWith("/") || /^[A-Za-z]:[\\/]/.test(wirePath)) return wirePath;
  return `${root.replace(/[\\/]+$/, "")}/${wirePath}`;
}
