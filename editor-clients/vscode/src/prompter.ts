// schemaForm's Prompter on VS Code's input box and quick pick.

import * as vscode from "vscode";

import type { InputRequest, PickItem, PickRequest, Prompter } from "./schemaForm";

interface ValueItem<T> extends vscode.QuickPickItem {
  value: T;
}

function toItem<T>(item: PickItem<T>): ValueItem<T> {
  const out: ValueItem<T> = { label: item.label, value: item.value };
  if (item.description !== undefined) out.description = item.description;
  if (item.detail !== undefined) out.detail = item.detail;
  return out;
}

export const vscodePrompter: Prompter = {
  async input(request: InputRequest): Promise<string | undefined> {
    const options: vscode.InputBoxOptions = {
      title: request.title,
      prompt: request.prompt,
      ignoreFocusOut: true,
      validateInput: (text) => request.validate(text) ?? null,
    };
    if (request.placeHolder !== undefined) options.placeHolder = request.placeHolder;
    if (request.value !== undefined) options.value = request.value;
    return vscode.window.showInputBox(options);
  },

  async pick<T>(request: PickRequest<T>): Promise<T | undefined> {
    const chosen = await vscode.window.showQuickPick(request.items.map(toItem), {
      title: request.title,
      placeHolder: request.placeHolder,
      ignoreFocusOut: true,
      matchOnDescription: true,
    });
    return chosen?.value;
  },

  async pickMany<T>(request: PickRequest<T>): Promise<T[] | undefined> {
    const chosen = await vscode.window.showQuickPick(request.items.map(toItem), {
      title: request.title,
      placeHolder: request.placeHolder,
      ignoreFocusOut: true,
      canPickMany: true,
    });
    return chosen?.map((item) => item.value);
  },
};
