// The Checkpoints view and undo: checkpoints/list newest first, each with Show Diff and
// Restore; "toold: Undo Last Agent Edit". The list is fetched when the view is shown and
// after the checkpoint index changes on disk or a restore, never on a timer.

import * as vscode from "vscode";

import {
  checkpointRow,
  conflictPaths,
  conflictQuestion,
  isNotFound,
  newestFirst,
  RESTORE_ANYWAY,
  restoredMessage,
} from "./checkpoints";
import { describeError } from "./client-core";
import type { TooldController } from "./controller";
import type { CheckpointInfo, CheckpointsRestoreResult } from "./protocol";

export const CHECKPOINT_SCHEME = "toold-checkpoint";
// index.jsonl is appended to by every recorded call and restore; an earlier toold rewrote
// index.json whole instead.
const INDEX = ".toold/checkpoints/index.{json,jsonl}";

export class CheckpointsView
  implements
    vscode.TreeDataProvider<CheckpointInfo>,
    vscode.TextDocumentContentProvider,
    vscode.Disposable
{
  private readonly changed = new vscode.EventEmitter<CheckpointInfo | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly diffChanged = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.diffChanged.event;
  private readonly disposables: { dispose(): unknown }[] = [];

  constructor(private readonly controller: TooldController) {
    const view = vscode.window.createTreeView("toold.checkpoints", { treeDataProvider: this });
    this.disposables.push(
      view,
      this.changed,
      this.diffChanged,
      vscode.workspace.registerTextDocumentContentProvider(CHECKPOINT_SCHEME, this),
      controller.onDidStart(() => {
        this.refresh();
      }),
      // Besides the index's file watcher, which VS Code cannot keep when inotify is exhausted.
      controller.onDidEndCall(() => {
        this.refresh();
      }),
      vscode.window.onDidChangeWindowState((state) => {
        if (state.focused) this.refresh();
      }),
    );
    const folder = controller.folder;
    if (folder !== undefined) {
      const watcher = vscode.workspace.createFileSystemWatcher(
        new vscode.RelativePattern(folder, INDEX),
      );
      const refresh = (): void => {
        this.refresh();
      };
      this.disposables.push(
        watcher,
        watcher.onDidCreate(refresh),
        watcher.onDidChange(refresh),
        watcher.onDidDelete(refresh),
      );
    }
  }

  register(): vscode.Disposable[] {
    const run = (id: string, fn: (arg?: CheckpointInfo) => Promise<void>): vscode.Disposable =>
      vscode.commands.registerCommand(id, async (arg?: CheckpointInfo) => {
        try {
          await fn(arg);
        } catch (error) {
          void vscode.window.showErrorMessage(`toold: ${describeError(error)}`);
        }
      });
    return [
      run("toold.undo", () => this.restore(undefined)),
      run("toold.checkpoints.refresh", () => {
        this.refresh();
        return Promise.resolve();
      }),
      run("toold.checkpoints.showDiff", (checkpoint?: CheckpointInfo) => this.showDiff(checkpoint)),
      run("toold.checkpoints.restore", (checkpoint?: CheckpointInfo) =>
        checkpoint === undefined ? Promise.resolve() : this.restore(checkpoint.id),
      ),
    ];
  }

  /** Ask the tree (when it is visible) and open diff documents to fetch again. */
  refresh(): void {
    this.changed.fire(undefined);
    for (const doc of vscode.workspace.textDocuments) {
      if (doc.uri.scheme === CHECKPOINT_SCHEME) this.diffChanged.fire(doc.uri);
    }
  }

  async getChildren(element?: CheckpointInfo): Promise<CheckpointInfo[]> {
    const api = this.controller.runningApi;
    if (element !== undefined || api === undefined) return [];
    try {
      return newestFirst(await api.listCheckpoints());
    } catch (error) {
      this.controller.output.appendLine(`Listing checkpoints failed: ${describeError(error)}`);
      return [];
    }
  }

  getTreeItem(checkpoint: CheckpointInfo): vscode.TreeItem {
    const row = checkpointRow(checkpoint);
    const item = new vscode.TreeItem(row.label, vscode.TreeItemCollapsibleState.None);
    item.id = checkpoint.id;
    item.description = row.description;
    item.tooltip = row.tooltip;
    item.iconPath = new vscode.ThemeIcon(row.icon);
    item.contextValue = row.context;
    item.command = {
      title: "Show Diff",
      command: "toold.checkpoints.showDiff",
      arguments: [checkpoint],
    };
    return item;
  }

  /** The diff document's text: checkpoints/diff of the id in its path. */
  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const api = await this.controller.ready();
    if (api === undefined) return "";
    const id = uri.path.split("/")[1] ?? "";
    try {
      const diff = await api.checkpointDiff(id);
      return diff === "" ? "# No difference: the files are as they were before this call.\n" : diff;
    } catch (error) {
      return `# toold: ${describeError(error)}\n`;
    }
  }

  /** Show Diff: what going back before the checkpoint would change, as a diff document. */
  async showDiff(checkpoint: CheckpointInfo | undefined): Promise<void> {
    if (checkpoint === undefined) return;
    const uri = vscode.Uri.from({
      scheme: CHECKPOINT_SCHEME,
      path: `/${checkpoint.id}/${checkpoint.tool}.diff`,
    });
    this.diffChanged.fire(uri); // an open one shows the diff as it is now
    const doc = await vscode.workspace.openTextDocument(uri);
    await vscode.languages.setTextDocumentLanguage(doc, "diff");
    await vscode.window.showTextDocument(doc, { preview: true });
  }

  /**
   * checkpoints/restore (the last call when `id` is undefined). Files changed outside
   * toold since: a modal offers "Restore anyway", which repeats it with force.
   */
  async restore(id: string | undefined): Promise<void> {
    const api = await this.controller.ready();
    if (api === undefined) return;
    let result: CheckpointsRestoreResult;
    try {
      result = await api.restoreCheckpoint(id);
    } catch (error) {
      if (isNotFound(error)) {
        void vscode.window.showInformationMessage(`toold: ${(error as Error).message}`);
        return;
      }
      const paths = conflictPaths(error);
      if (paths === undefined) throw error;
      const choice = await vscode.window.showWarningMessage(
        conflictQuestion(paths),
        { modal: true, detail: "A restore is itself a checkpoint: restoring it redoes." },
        RESTORE_ANYWAY,
      );
      if (choice !== RESTORE_ANYWAY) return;
      result = await api.restoreCheckpoint(id, true);
    }
    this.refresh();
    const undone = (await api.listCheckpoints()).find((c) => c.id === result.checkpoint.restores);
    const choice = await vscode.window.showInformationMessage(
      restoredMessage(result, undone),
      "Show Checkpoints",
    );
    if (choice !== undefined) {
      await vscode.commands.executeCommand("toold.checkpoints.focus");
    }
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
  }
}
