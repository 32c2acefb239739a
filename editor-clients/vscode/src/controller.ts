// One daemon for the open workspace: launching it through vscode-languageclient, its
// state in the status bar, its notifications in the views and as messages.

import * as vscode from "vscode";
import {
  LanguageClient,
  type LanguageClientOptions,
  type ServerOptions,
  State,
  TransportKind,
} from "vscode-languageclient/node";

import { describeError, handlePermissionRequests, subscribe, TooldApi } from "./client-core";
import { INSTALL_COMMAND, LaunchError, type LaunchSource, resolveLaunch } from "./launch";
import {
  type DaemonState,
  jobFinishedMessage,
  JobsModel,
  renderJob,
  statusText,
  taskNodes,
  teamMessageText,
  todoNodes,
} from "./models";
import {
  buildInitializationOptions,
  DEFAULT_SETTINGS,
  INHERIT,
  type TooldSettings,
} from "./protocol";
import { DiffPreviewFeature, EditPreviews } from "./preview";
import { AgentProblems, showDiagnostics } from "./problems";
import { onInterpreterChanged, selectedInterpreter } from "./pythonExtension";
import { NodeTreeProvider } from "./views";

/** Anything with dispose(): output channels, subscriptions, providers. */
interface DisposableLike {
  dispose(): unknown;
}

const RESTART_KEYS = ["path", "pythonPath", "toolRunner", "executionEvents", "logLevel"];

export function readSettings(): TooldSettings {
  const config = vscode.workspace.getConfiguration("toold");
  return {
    path: config.get<string>("path", DEFAULT_SETTINGS.path),
    pythonPath: config.get<string>("pythonPath", DEFAULT_SETTINGS.pythonPath),
    permissionMode: config.get("permissionMode", DEFAULT_SETTINGS.permissionMode),
    toolRunner: config.get("toolRunner", DEFAULT_SETTINGS.toolRunner),
    executionEvents: config.get<boolean>("executionEvents", DEFAULT_SETTINGS.executionEvents),
    logLevel: config.get<string>("logLevel", DEFAULT_SETTINGS.logLevel),
  };
}

/** The permission dialog's text: the daemon's question, and where its diff is open. */
function permissionDetail(message: string, previewed: boolean): string {
  const question = message.replace(/^toold: /, "");
  return previewed
    ? `${question}\n\nThe change is open in the diff editor behind this dialog.`
    : question;
}

export class TooldController implements vscode.Disposable {
  readonly output = vscode.window.createOutputChannel("toold");
  readonly jobs = new JobsModel();
  readonly todos = new NodeTreeProvider();
  readonly tasks = new NodeTreeProvider();
  readonly previews = new EditPreviews((line) => {
    this.output.appendLine(line);
  });
  /** What the agent's edits broke: diagnostics/changed in the Problems panel. */
  readonly problems = new AgentProblems();
  private readonly started = new vscode.EventEmitter<void>();
  /** Fires each time a daemon has started and answered initialize. */
  readonly onDidStart = this.started.event;
  private readonly callEnded = new vscode.EventEmitter<void>();
  /** Fires when a tools/call or agent/run this window started has ended, however it ended. */
  readonly onDidEndCall = this.callEnded.event;
  private readonly statusBar = vscode.window.createStatusBarItem(
    vscode.StatusBarAlignment.Left,
    50,
  );
  private client: LanguageClient | undefined;
  private api: TooldApi | undefined;
  private starting: Promise<void> | undefined;
  private clientSubscriptions: DisposableLike[] = [];
  private state: DaemonState = "stopped";
  private mode: string | undefined;
  /** Where the running daemon was found; undefined when none started. */
  private launchSource: LaunchSource | undefined;
  private watchingInterpreter = false;
  private readonly disposables: DisposableLike[] = [];

  constructor() {
    this.statusBar.command = {
      title: "toold commands",
      command: "workbench.action.quickOpen",
      arguments: [">toold: "],
    };
    this.disposables.push(
      this.output,
      this.statusBar,
      this.todos,
      this.tasks,
      this.previews,
      this.problems,
      this.started,
      this.callEnded,
      vscode.window.registerTreeDataProvider("toold.todos", this.todos),
      vscode.window.registerTreeDataProvider("toold.tasks", this.tasks),
      vscode.workspace.onDidChangeConfiguration((e) => {
        void this.onConfigurationChanged(e);
      }),
    );
    this.render();
    this.statusBar.show();
  }

  /** Run `call` (a tools/call or agent/run), then tell the views: its edits are checkpoints. */
  async whileCalling<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } finally {
      this.callEnded.fire();
    }
  }

  /** The workspace folder the daemon serves (the first one). */
  get folder(): vscode.WorkspaceFolder | undefined {
    return vscode.workspace.workspaceFolders?.[0];
  }

  /** The daemon's API when it is running (never starts it). */
  get runningApi(): TooldApi | undefined {
    return this.state === "running" ? this.api : undefined;
  }

  /** The running daemon's API, starting it when needed; undefined (after a message) if it cannot run. */
  async ready(): Promise<TooldApi | undefined> {
    if (this.api === undefined || this.state !== "running") {
      await this.start();
    }
    if (this.api === undefined || this.state !== "running") {
      void vscode.window.showErrorMessage(
        this.folder === undefined
          ? "toold serves a workspace folder: open a folder first."
          : "toold is not running. See the toold output channel for why.",
      );
      return undefined;
    }
    return this.api;
  }

  start(): Promise<void> {
    this.starting ??= this.doStart().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  private async doStart(): Promise<void> {
    if (this.client !== undefined) {
      if (this.state === "running") return;
      await this.stop(); // languageclient gave up restarting it: start afresh
    }
    const folder = this.folder;
    if (folder === undefined) {
      this.output.appendLine("No folder is open: toold serves a workspace folder.");
      this.setState("stopped");
      return;
    }
    this.setState("starting");
    const settings = readSettings();
    let launch;
    try {
      launch = await resolveLaunch(settings, {
        env: process.env,
        workspace: folder.uri.fsPath,
        lookups: { selectedInterpreter: () => selectedInterpreter(folder.uri) },
      });
    } catch (error) {
      this.launchSource = undefined;
      void this.watchInterpreter();
      this.setState("failed");
      this.reportLaunchError(error);
      return;
    }
    this.launchSource = launch.source;
    void this.watchInterpreter();
    this.output.appendLine(`Starting ${launch.description} for ${folder.uri.fsPath}`);
    const serverOptions: ServerOptions = {
      command: launch.command,
      args: launch.args,
      transport: TransportKind.stdio,
      options: { cwd: folder.uri.fsPath },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [],
      workspaceFolder: folder,
      outputChannel: this.output,
      initializationOptions: () => buildInitializationOptions(folder.uri.fsPath, readSettings()),
      connectionOptions: { maxRestartCount: 3 },
    };
    const client = new LanguageClient("toold", "toold", serverOptions, clientOptions);
    client.registerFeature(new DiffPreviewFeature());
    const api = new TooldApi(client);
    this.client = client;
    this.api = api;
    this.mode = settings.permissionMode === INHERIT ? undefined : settings.permissionMode;
    this.clientSubscriptions = [
      client.onDidChangeState((e) => {
        this.onStateChanged(e.newState);
      }),
      handlePermissionRequests(client, async (message, titles, isPermission) =>
        isPermission
          ? await this.previews.whileAsking((previewed) =>
              vscode.window.showWarningMessage(
                "toold: allow the agent's tool call?",
                { modal: true, detail: permissionDetail(message, previewed) },
                ...titles,
              ),
            )
          : await vscode.window.showInformationMessage(message, ...titles),
      ),
      subscribe(api, {
        "todos/changed": (p) => {
          this.todos.set(todoNodes(p.todos));
        },
        "tasks/changed": (p) => {
          this.tasks.set(taskNodes(p.tasks));
        },
        "jobs/finished": (p) => {
          this.jobs.finished(p);
          this.render();
          const { text, ok } = jobFinishedMessage(p);
          const show = ok ? vscode.window.showInformationMessage : vscode.window.showWarningMessage;
          void show(text, "Show Output").then((choice) => {
            if (choice !== undefined) void this.showJobOutput(p.jobId);
          });
        },
        "permissions/preview": (p) => {
          this.previews.show(p);
        },
        "diagnostics/changed": (p) => {
          this.problems.changed(folder.uri, p);
        },
        "team/message": (p) => {
          void vscode.window.showInformationMessage(teamMessageText(p.message));
        },
        "skills/changed": (p) => {
          this.output.appendLine(`Skills: ${p.skills.map((s) => s.name).join(", ") || "none"}`);
        },
        "execution/event": (p) => {
          const took =
            p.durationMs === undefined || p.durationMs === null
              ? ""
              : ` ${p.durationMs.toFixed(0)} ms`;
          this.output.appendLine(
            `${p.event} ${p.tool} [${p.runner}]${took}${p.error ? `: ${p.error}` : ""}`,
          );
        },
      }),
    ];
    try {
      await client.start();
    } catch (error) {
      this.output.appendLine(`toold failed to start: ${describeError(error)}`);
      this.setState("failed");
      void vscode.window
        .showErrorMessage(`toold failed to start: ${describeError(error)}`, "Show Log")
        .then((choice) => {
          if (choice !== undefined) this.output.show();
        });
      await this.stop();
      this.setState("failed");
      return;
    }
    await this.refreshAll();
    this.started.fire();
  }

  /** Once: another interpreter selected in the Python extension may change which toold runs. */
  private async watchInterpreter(): Promise<void> {
    if (this.watchingInterpreter) return;
    this.watchingInterpreter = true;
    const subscription = await onInterpreterChanged(() => {
      void this.onInterpreterChanged();
    });
    this.disposables.push(subscription);
  }

  private async onInterpreterChanged(): Promise<void> {
    if (this.launchSource === undefined && this.state === "failed") {
      await this.start(); // not found before: the new interpreter may have it
      return;
    }
    if (this.launchSource !== "python extension") return;
    const choice = await vscode.window.showInformationMessage(
      "The Python interpreter changed. Restart toold with it?",
      "Restart",
    );
    if (choice === "Restart") await this.restart();
  }

  private reportLaunchError(error: unknown): void {
    const message = describeError(error);
    this.output.appendLine(message);
    if (!(error instanceof LaunchError)) {
      void vscode.window.showErrorMessage(`toold: ${message}`);
      return;
    }
    void vscode.window
      .showErrorMessage(message, "Open Settings", "Copy Install Command")
      .then(async (choice) => {
        if (choice === "Open Settings") {
          await vscode.commands.executeCommand("workbench.action.openSettings", "toold.");
        } else if (choice === "Copy Install Command") {
          await vscode.env.clipboard.writeText(INSTALL_COMMAND);
        }
      });
  }

  async stop(): Promise<void> {
    for (const d of this.clientSubscriptions) d.dispose();
    this.clientSubscriptions = [];
    // A stopped daemon's diagnostics may be stale: the next one reports afresh.
    this.problems.clear();
    const client = this.client;
    this.client = undefined;
    this.api = undefined;
    if (client !== undefined) {
      try {
        await client.dispose(5000);
      } catch (error) {
        this.output.appendLine(`Stopping toold: ${describeError(error)}`);
      }
    }
    this.setState("stopped");
  }

  async restart(): Promise<void> {
    await this.starting;
    await this.stop();
    await this.start();
  }

  /** Reload the trees and the job count from the daemon. */
  async refreshAll(): Promise<void> {
    const api = this.api;
    if (api === undefined) return;
    try {
      const [todos, tasks, jobs] = await Promise.all([
        api.listTodos(),
        api.listTasks(),
        api.listJobs(),
      ]);
      this.todos.set(todoNodes(todos));
      this.tasks.set(taskNodes(tasks));
      this.jobs.reset(jobs);
      this.render();
    } catch (error) {
      this.output.appendLine(`Refreshing toold's views failed: ${describeError(error)}`);
    }
  }

  async refreshJobs(): Promise<void> {
    if (this.api === undefined) return;
    this.jobs.reset(await this.api.listJobs());
    this.render();
  }

  /** jobs/get into an untitled editor. */
  async showJobOutput(jobId: string): Promise<void> {
    const api = await this.ready();
    if (api === undefined) return;
    try {
      const job = await api.getJob(jobId);
      const doc = await vscode.workspace.openTextDocument({
        content: renderJob(job),
        language: "log",
      });
      await vscode.window.showTextDocument(doc, { preview: false });
    } catch (error) {
      void vscode.window.showErrorMessage(`toold: ${describeError(error)}`);
    }
  }

  setMode(mode: string): void {
    this.mode = mode;
    this.render();
  }

  private onStateChanged(state: State): void {
    // A daemon that stopped (languageclient may start it again) said nothing since.
    if (state !== State.Running) this.problems.clear();
    if (state === State.Running) this.setState("running");
    else if (state === State.Starting) this.setState("starting");
    else this.setState("stopped");
  }

  private setState(state: DaemonState): void {
    this.state = state;
    this.render();
  }

  private render(): void {
    const { text, tooltip } = statusText(this.state, this.jobs.running, this.mode);
    this.statusBar.text = text;
    this.statusBar.tooltip = tooltip;
    this.statusBar.backgroundColor =
      this.state === "failed" ? new vscode.ThemeColor("statusBarItem.errorBackground") : undefined;
  }

  private async onConfigurationChanged(e: vscode.ConfigurationChangeEvent): Promise<void> {
    if (e.affectsConfiguration("toold.diagnostics.show") && !showDiagnostics()) {
      this.problems.clear();
    }
    if (!e.affectsConfiguration("toold") || this.client === undefined) return;
    const settings = readSettings();
    if (e.affectsConfiguration("toold.permissionMode") && settings.permissionMode !== INHERIT) {
      try {
        this.setMode((await this.api?.setMode(settings.permissionMode)) ?? settings.permissionMode);
      } catch (error) {
        void vscode.window.showErrorMessage(`toold: ${describeError(error)}`);
      }
    }
    if (RESTART_KEYS.some((key) => e.affectsConfiguration(`toold.${key}`))) {
      const choice = await vscode.window.showInformationMessage(
        "Restart toold to apply the new settings?",
        "Restart",
      );
      if (choice === "Restart") await this.restart();
    }
  }

  dispose(): void {
    void this.stop();
    for (const d of this.disposables) d.dispose();
  }
}
