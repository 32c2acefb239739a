// toold's diagnostics in the Problems panel and as squiggles: one DiagnosticCollection
// ("toold") kept in step with diagnostics/changed. They come from the language servers
// toold runs after the agent's writes, so each source reads "toold: Ruff", apart from
// what the user's own language extensions report for the same file.

import * as vscode from "vscode";

import { absolutePath, COLLECTION, type Problem, toProblem } from "./diagnostics";
import type { DiagnosticsChanged } from "./protocol";

const SEVERITIES = [
  vscode.DiagnosticSeverity.Error,
  vscode.DiagnosticSeverity.Warning,
  vscode.DiagnosticSeverity.Information,
  vscode.DiagnosticSeverity.Hint,
];

/** `toold.diagnostics.show`: false keeps toold's diagnostics out of the Problems panel. */
export function showDiagnostics(): boolean {
  return vscode.workspace.getConfiguration("toold").get<boolean>("diagnostics.show", true);
}

function toDiagnostic(problem: Problem): vscode.Diagnostic {
  // toold gives the start only: an empty range, which VS Code widens to the word there.
  const position = new vscode.Position(problem.line, problem.column);
  const diagnostic = new vscode.Diagnostic(
    new vscode.Range(position, position),
    problem.message,
    SEVERITIES[problem.severity] ?? vscode.DiagnosticSeverity.Error,
  );
  diagnostic.source = problem.source;
  if (problem.code !== undefined) diagnostic.code = problem.code;
  return diagnostic;
}

/** The "toold" diagnostic collection of one window. */
export class AgentProblems implements vscode.Disposable {
  private readonly collection = vscode.languages.createDiagnosticCollection(COLLECTION);

  /** diagnostics/changed: replace the file's diagnostics (an empty list clears it). */
  changed(root: vscode.Uri, params: DiagnosticsChanged): void {
    if (!showDiagnostics()) return;
    const uri = vscode.Uri.file(absolutePath(root.fsPath, params.path));
    if (params.diagnostics.length === 0) {
      this.collection.delete(uri);
      return;
    }
    this.collection.set(uri, params.diagnostics.map(toProblem).map(toDiagnostic));
  }

  /** Forget them all: the daemon stopped or restarted, or the setting was turned off. */
  clear(): void {
    this.collection.clear();
  }

  dispose(): void {
    this.collection.dispose();
  }
}
