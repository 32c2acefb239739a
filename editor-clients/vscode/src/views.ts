// The Todos and Tasks trees: VS Code TreeDataProviders over client-core's TreeNode models.

import * as vscode from "vscode";

import type { TreeNode } from "./models";

export class NodeTreeProvider implements vscode.TreeDataProvider<TreeNode> {
  private nodes: TreeNode[] = [];
  private readonly changed = new vscode.EventEmitter<TreeNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;

  /** Replace the whole tree (notifications carry the full list). */
  set(nodes: TreeNode[]): void {
    this.nodes = nodes;
    this.changed.fire(undefined);
  }

  getTreeItem(node: TreeNode): vscode.TreeItem {
    const item = new vscode.TreeItem(
      node.label,
      node.children.length > 0
        ? vscode.TreeItemCollapsibleState.Collapsed
        : vscode.TreeItemCollapsibleState.None,
    );
    item.id = node.id;
    item.description = node.description;
    item.tooltip = node.tooltip;
    item.iconPath = new vscode.ThemeIcon(node.icon);
    return item;
  }

  getChildren(node?: TreeNode): TreeNode[] {
    return node === undefined ? this.nodes : node.children;
  }

  dispose(): void {
    this.changed.dispose();
  }
}
