// Seeing an edit before allowing it: the daemon's permissions/preview opens VS Code's
// diff editor on read-only `toold-preview:` documents, and the tabs close once the
// permission prompt that follows is answered.

import * as vscode from "vscode";
import type { FeatureState, StaticFeature } from "vscode-languageclient/node";

import { type PermissionsPreview, PREVIEW_CAPABILITY } from "./protocol";

export const PREVIEW_SCHEME = "toold-preview";
/** More files than this in one edit: their unified diff opens instead of one tab each. */
const MAX_DIFF_TABS = 5;

/** Declares `experimental.toold.diffPreview` in initialize's client capabilities. */
export class DiffPreviewFeature implements StaticFeature {
  fillClientCapabilities(capabilities: { experimental?: unknown }): void {
    const experimental =
      typeof capabilities.experimental === "object" && capabilities.experimental !== null
        ? capabilities.experimental
        : {};
    capabilities.experimental = { ...experimental, ...PREVIEW_CAPABILITY };
  }

  initialize(): void {
    // Nothing to set up: the controller listens for the notification.
  }

  getState(): FeatureState {
    return { kind: "static" };
  }

  clear(): void {
    // Nothing held per connection.
  }
}

/** How many files a unified diff changes (its `+++` headers and binary-file lines). */
function filesIn(diff: string): number {
  return diff.split("\n").filter((line) => /^(\+\+\+ |Binary files? )/.test(line)).length;
}

interface Shown {
  uris: Set<string>;
  opened: Promise<void>;
}

/** The previews' documents, the tabs showing them, and closing them after the answer. */
export class EditPreviews implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly texts = new Map<string, string>();
  private counter = 0;
  private pending: Shown | undefined;
  private readonly registration: vscode.Disposable;

  constructor(private readonly log: (line: string) => void) {
    this.registration = vscode.workspace.registerTextDocumentContentProvider(PREVIEW_SCHEME, this);
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.toString()) ?? "";
  }

  /** permissions/preview: open a diff editor per file (the unified diff when none fit). */
  show(preview: PermissionsPreview): void {
    const previous = this.pending;
    if (previous !== undefined) void this.close(previous); // its prompt never came
    this.counter += 1;
    const uris = new Set<string>();
    const opened = this.open(preview, `/${String(this.counter)}`, uris).catch((error: unknown) => {
      this.log(`Opening the edit preview failed: ${String(error)}`);
    });
    this.pending = { uris, opened };
  }

  /** Run the permission prompt (told whether a preview is open for it); then close that preview. */
  async whileAsking<T>(ask: (previewed: boolean) => Thenable<T>): Promise<T> {
    const shown = this.pending;
    this.pending = undefined;
    try {
      return await ask(shown !== undefined);
    } finally {
      if (shown !== undefined) await this.close(shown);
    }
  }

  private document(base: string, path: string, text: string, uris: Set<string>): vscode.Uri {
    const uri = vscode.Uri.from({ scheme: PREVIEW_SCHEME, path: `${base}/${path}` });
    this.texts.set(uri.toString(), text);
    uris.add(uri.toString());
    return uri;
  }

  private async open(preview: PermissionsPreview, base: string, uris: Set<string>): Promise<void> {
    const files = preview.files;
    // Large or binary files are only in the unified diff: show it when some are missing.
    if (
      files.length === 0 ||
      files.length > MAX_DIFF_TABS ||
      filesIn(preview.diff) > files.length
    ) {
      const uri = this.document(base, `${preview.tool}.diff`, preview.diff, uris);
      const doc = await vscode.workspace.openTextDocument(uri);
      await vscode.window.showTextDocument(doc, { preview: false, preserveFocus: true });
      if (files.length === 0 || files.length > MAX_DIFF_TABS) return;
    }
    for (const file of files) {
      const before = this.document(`${base}/before`, file.path, file.original ?? "", uris);
      const after = this.document(`${base}/after`, file.path, file.modified ?? "", uris);
      const state =
        file.original === null ? " (new file)" : file.modified === null ? " (deleted)" : "";
      await vscode.commands.executeCommand(
        "vscode.diff",
        before,
        after,
        `toold preview: ${file.path}${state} (${preview.tool})`,
        { preview: false, preserveFocus: true },
      );
    }
  }

  private async close(shown: Shown): Promise<void> {
    await shown.opened;
    const tabs = vscode.window.tabGroups.all
      .flatMap((group) => group.tabs)
      .filter((tab) => {
        const input = tab.input;
        if (input instanceof vscode.TabInputTextDiff) {
          return shown.uris.has(input.modified.toString());
        }
        return input instanceof vscode.TabInputText && shown.uris.has(input.uri.toString());
      });
    try {
      if (tabs.length > 0) await vscode.window.tabGroups.close(tabs, true);
    } catch (error) {
      this.log(`Closing the edit preview failed: ${String(error)}`);
    }
    for (const uri of shown.uris) this.texts.delete(uri);
  }

  dispose(): void {
    this.registration.dispose();
    this.texts.clear();
  }
}
