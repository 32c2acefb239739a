// Entry point: one toold daemon per window, for its first workspace folder.

import type * as vscode from "vscode";

import { Commands } from "./commands";
import { TooldController } from "./controller";

let controller: TooldController | undefined;

export function activate(context: vscode.ExtensionContext): void {
  controller = new TooldController();
  context.subscriptions.push(controller, ...new Commands(controller).register());
  void controller.start(); // commands wait for it through controller.ready()
}

export async function deactivate(): Promise<void> {
  await controller?.stop();
  controller = undefined;
}
