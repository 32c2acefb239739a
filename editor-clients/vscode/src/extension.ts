// Entry point: one toold daemon per window, for its first workspace folder.

import type * as vscode from "vscode";

import { CheckpointsView } from "./checkpointsView";
import { Commands } from "./commands";
import { TooldController } from "./controller";

let controller: TooldController | undefined;

export function activate(context: vscode.ExtensionContext): void {
  controller = new TooldController();
  const checkpoints = new CheckpointsView(controller);
  context.subscriptions.push(
    controller,
    checkpoints,
    ...checkpoints.register(),
    ...new Commands(controller).register(),
  );
  void controller.start(); // commands wait for it through controller.ready()
}

export async function deactivate(): Promise<void> {
  await controller?.stop();
  controller = undefined;
}
