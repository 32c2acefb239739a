// The command palette: Run Tool, Run in Background, Background Jobs, Permission Mode,
// Ask Agent, Restart.

import * as vscode from "vscode";

import { agentUnavailableFix, describeError, isCancelled } from "./client-core";
import type { TooldController } from "./controller";
import { JOB_ICONS, renderAgentAnswer, renderResult, summarizeResult } from "./models";
import { PERMISSION_MODES, type JobInfo, type JsonSchemaObject, type NativeTool } from "./protocol";
import { vscodePrompter } from "./prompter";
import { collectArguments } from "./schemaForm";

const BACKGROUND_TOOL = "background_run";

interface ToolItem extends vscode.QuickPickItem {
  tool: NativeTool;
}

interface JobItem extends vscode.QuickPickItem {
  job: JobInfo;
}

const CANCEL_BUTTON: vscode.QuickInputButton = {
  iconPath: new vscode.ThemeIcon("stop-circle"),
  tooltip: "Cancel this job",
};

function lastLine(text: string): string {
  const lines = text.split("\n").filter((l) => l.trim() !== "");
  const line = lines[lines.length - 1] ?? "";
  return line.length > 100 ? `${line.slice(0, 97)}…` : line;
}

export class Commands {
  /** Answers shown so far: each gets an untitled document of a name never used before. */
  private answers = 0;

  constructor(private readonly controller: TooldController) {}

  register(): vscode.Disposable[] {
    const run = (id: string, fn: () => Promise<void>): vscode.Disposable =>
      vscode.commands.registerCommand(id, async () => {
        try {
          await fn();
        } catch (error) {
          void vscode.window.showErrorMessage(`toold: ${describeError(error)}`);
        }
      });
    return [
      run("toold.runTool", () => this.runTool()),
      run("toold.runInBackground", () => this.runInBackground()),
      run("toold.showJobs", () => this.showJobs()),
      run("toold.setPermissionMode", () => this.setPermissionMode()),
      run("toold.askAgent", () => this.askAgent()),
      run("toold.restart", () => this.controller.restart()),
      run("toold.refresh", () => this.controller.refreshAll()),
      run("toold.showLog", () => {
        this.controller.output.show();
        return Promise.resolve();
      }),
    ];
  }

  /** "toold: Run Tool…": pick a tool, fill its arguments, run it with progress. */
  async runTool(): Promise<void> {
    const api = await this.controller.ready();
    if (api === undefined) return;
    const tools = await api.listTools();
    const items: ToolItem[] = tools.map((tool) => ({
      label: tool.name,
      description: [...(tool.aliases ?? []), ...(tool.effectTags ?? [])].join(" · "),
      detail: tool.description.split("\n", 1)[0] ?? "",
      tool,
    }));
    const chosen = await vscode.window.showQuickPick(items, {
      title: "toold: Run Tool",
      placeHolder: "Which tool?",
      matchOnDescription: true,
      matchOnDetail: true,
    });
    if (chosen === undefined) return;
    const args = await collectArguments(chosen.tool.name, chosen.tool.parameters, vscodePrompter);
    if (args === undefined) return;
    await this.callAndShow(chosen.tool.name, args);
  }

  /** Run one tool as the user, with cancellable progress, and show its result. */
  async callAndShow(name: string, args: Record<string, unknown>): Promise<void> {
    const api = await this.controller.ready();
    if (api === undefined) return;
    const result = await vscode.window.withProgress(
      {
        location: vscode.ProgressLocation.Notification,
        title: `toold: ${name}`,
        cancellable: true,
      },
      async (progress, token) => {
        try {
          return await this.controller.whileCalling(() =>
            api.callTool(name, args, {
              origin: "user",
              token,
              onProgress: (value) => {
                if (value.kind !== "end" && value.message) {
                  progress.report({ message: lastLine(value.message) });
                }
              },
            }),
          );
        } catch (error) {
          if (isCancelled(error)) return undefined;
          throw error;
        }
      },
    );
    if (result === undefined) {
      void vscode.window.showInformationMessage(`toold: ${name} was cancelled.`);
      return;
    }
    const rendered = renderResult(result);
    const target = vscode.workspace.getConfiguration("toold").get<string>("resultTarget", "editor");
    if (target === "output") {
      const out = this.controller.output;
      const status = result.isError === true ? " (failed)" : "";
      out.appendLine(`── ${name} ${JSON.stringify(args)}${status}`);
      out.appendLine(rendered.text);
      out.show(true);
    } else {
      const doc = await vscode.workspace.openTextDocument({
        content: rendered.text,
        language: rendered.language,
      });
      await vscode.window.showTextDocument(doc, { preview: false });
    }
    if (result.isError === true) {
      void vscode.window.showErrorMessage(`toold: ${summarizeResult(name, result)}`);
    }
  }

  /** "toold: Run in Background…": background_run with its schema's inputs. */
  async runInBackground(): Promise<void> {
    const api = await this.controller.ready();
    if (api === undefined) return;
    const tools = await api.listTools();
    const schema: JsonSchemaObject = tools.find((t) => t.name === BACKGROUND_TOOL)?.parameters ?? {
      type: "object",
      properties: { command: { type: "string", description: "Shell command to run." } },
      required: ["command"],
    };
    const args = await collectArguments(BACKGROUND_TOOL, schema, vscodePrompter);
    if (args === undefined) return;
    const result = await api.callTool(BACKGROUND_TOOL, args, { origin: "user" });
    await this.controller.refreshJobs();
    const text = renderResult(result).text;
    if (result.isError === true) {
      void vscode.window.showErrorMessage(`toold: ${text}`);
      return;
    }
    const choice = await vscode.window.showInformationMessage(`toold: ${text}`, "Show Jobs");
    if (choice !== undefined) await this.showJobs();
  }

  /** "toold: Show Background Jobs": pick one to see its output; the stop button cancels it. */
  async showJobs(): Promise<void> {
    const api = await this.controller.ready();
    if (api === undefined) return;
    await this.controller.refreshJobs();
    const jobs = this.controller.jobs.list();
    if (jobs.length === 0) {
      void vscode.window.showInformationMessage(
        "toold: no background jobs. Start one with “toold: Run in Background…”.",
      );
      return;
    }
    const pick = vscode.window.createQuickPick<JobItem>();
    pick.title = "toold: Background Jobs";
    pick.placeholder = "Pick a job to see its output; the stop button cancels a running job";
    pick.matchOnDescription = true;
    const toItems = (list: JobInfo[]): JobItem[] =>
      list.map((job) => ({
        label: `$(${JOB_ICONS[job.status]}) ${job.jobId}`,
        description: job.command,
        detail: `${job.status.replace("_", " ")} · started ${job.startedAt}${
          job.exitCode === undefined || job.exitCode === null ? "" : ` · exit ${job.exitCode}`
        }`,
        buttons: job.status === "running" ? [CANCEL_BUTTON] : [],
        job,
      }));
    pick.items = toItems(jobs);
    const done = new Promise<void>((resolve) => {
      pick.onDidHide(() => {
        pick.dispose();
        resolve();
      });
    });
    pick.onDidAccept(() => {
      const item = pick.selectedItems[0];
      pick.hide();
      if (item !== undefined) void this.controller.showJobOutput(item.job.jobId);
    });
    pick.onDidTriggerItemButton(async (e) => {
      try {
        const job = await api.cancelJob(e.item.job.jobId);
        void vscode.window.showInformationMessage(`toold: job ${job.jobId} is ${job.status}.`);
        await this.controller.refreshJobs();
        pick.items = toItems(this.controller.jobs.list());
      } catch (error) {
        void vscode.window.showErrorMessage(`toold: ${describeError(error)}`);
      }
    });
    pick.show();
    await done;
  }

  /**
   * "toold: Ask Agent…": agent/run on a prompt, its tool calls streamed as progress
   * (Cancel stops it), the final text in a markdown preview.
   */
  async askAgent(): Promise<void> {
    const api = await this.controller.ready();
    if (api === undefined) return;
    const prompt = await vscode.window.showInputBox({
      title: "toold: Ask Agent",
      prompt: "What should the agent do in this workspace?",
      placeHolder: "e.g. Find where the config is loaded and explain it",
      ignoreFocusOut: true,
      validateInput: (value) => (value.trim() === "" ? "Type a prompt for the agent." : undefined),
    });
    if (prompt === undefined || prompt.trim() === "") return;
    const out = this.controller.output;
    out.appendLine(`── agent: ${prompt}`);
    const toolCalls: string[] = [];
    let text: string | undefined;
    try {
      text = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: "toold agent", cancellable: true },
        async (progress, token) => {
          progress.report({ message: "thinking…" });
          try {
            return await this.controller.whileCalling(() =>
              api.runAgent(prompt, {
                token,
                onProgress: (value) => {
                  if (value.kind === "report" && value.message) {
                    toolCalls.push(value.message);
                    out.appendLine(`   ${value.message}`);
                    progress.report({ message: lastLine(value.message) });
                  }
                },
              }),
            );
          } catch (error) {
            if (isCancelled(error)) return undefined;
            throw error;
          }
        },
      );
    } catch (error) {
      const fix = agentUnavailableFix(error);
      if (fix === undefined) throw error;
      out.appendLine(describeError(error));
      void vscode.window.showErrorMessage(fix, { modal: false }, "Show Log").then((choice) => {
        if (choice !== undefined) out.show();
      });
      return;
    }
    if (text === undefined) {
      out.appendLine("   (cancelled)");
      void vscode.window.showInformationMessage("toold: the agent was cancelled.");
      return;
    }
    const doc = await this.answerDocument(renderAgentAnswer(prompt, toolCalls, text));
    await vscode.commands.executeCommand("markdown.showPreview", doc.uri);
  }

  /**
   * An untitled markdown document "toold answer N.md" holding `content`, N never used
   * before. openTextDocument({content}) reuses "Untitled-1" once its editor is closed, and
   * a preview opened on the reused name could show the closed document's text.
   */
  private async answerDocument(content: string): Promise<vscode.TextDocument> {
    const open = new Set(vscode.workspace.textDocuments.map((d) => d.uri.toString()));
    let uri: vscode.Uri;
    do {
      this.answers += 1;
      uri = vscode.Uri.from({ scheme: "untitled", path: `toold answer ${this.answers}.md` });
    } while (open.has(uri.toString()));
    const doc = await vscode.workspace.openTextDocument(uri);
    const edit = new vscode.WorkspaceEdit();
    edit.insert(uri, new vscode.Position(0, 0), content);
    if (!(await vscode.workspace.applyEdit(edit))) {
      throw new Error(`could not write the agent's answer into ${uri.path}`);
    }
    return doc;
  }

  /** "toold: Set Permission Mode…" (permissions/setMode, for this daemon's life). */
  async setPermissionMode(): Promise<void> {
    const api = await this.controller.ready();
    if (api === undefined) return;
    const chosen = await vscode.window.showQuickPick(
      PERMISSION_MODES.map((m) => ({ label: m.mode, detail: m.detail, mode: m.mode })),
      {
        title: "toold: Set Permission Mode",
        placeHolder: "How should toold guard the agent's calls?",
      },
    );
    if (chosen === undefined) return;
    const mode = await api.setMode(chosen.mode);
    this.controller.setMode(mode);
    void vscode.window.showInformationMessage(
      `toold: permission mode is now “${mode}” until the daemon restarts ` +
        "(set toold.permissionMode to keep it).",
    );
  }
}
