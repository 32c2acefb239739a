"""The VS Code extension in real VS Code: code-server 4.139.1 (VS Code 1.139.1) in Chromium.

The .vsix is built with editor-clients/README.md's command and installed into a fresh
user-data and extensions folder; VS Code opens a workspace holding toold.toml and the
extension starts this repository's daemon as a Python user's project would have it: the workspace's
``.venv/bin/toold`` (the ``toold`` script of the interpreter running the tests). Neither
PATH nor User settings can carry it: code-server's extension host takes PATH from a login
shell (which drops an activated virtualenv's ``bin/``), and a remote window, which
code-server's is, ignores machine-overridable settings such as ``toold.pythonPath`` in User
settings. The second workspace sets ``toold.pythonPath`` in its own .vscode/settings.json,
where a remote window applies it. Playwright drives the
window through the command palette, quick picks, input boxes, notifications and dialogs,
as a person would. The agent's model is a real HTTP server on 127.0.0.1 speaking the
Messages API (tests/agents/conftest.py): the public internet is the one fake.

Screenshots of every step: tests/clients/.artifacts/vscode-real/<test>/NN-step.png.
The tests run in file order against one window, like one person's session.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from tests.agents.conftest import API_KEY, ModelServer, tool_results
from tests.clients import code_server
from tests.clients.toolchain import CLIENTS, ROOT, apt_install, run
from tests.clients.vscode_ui import CHROMIUM_FLAGS, WAIT_MS, Screens, Workbench
from tests.engine.support import stop_engines
from tests.environment import in_ci, unavailable
from tests.processes import processes_matching, wait_gone
from tests.waiting import wait_until

ARTIFACTS = ROOT / "tests" / "clients" / ".artifacts" / "vscode-real"
VSCODE = CLIENTS / "vscode"
STATUS = "toold.toold"  # the status-bar item's id: <publisher>.<name>
LISTENING = re.compile(r"HTTP server listening on (http://127\.0\.0\.1:\d+)/")
SLOW = "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do echo tick-$i; sleep 1; done"


def _set_up() -> code_server.CodeServer:
    """code-server and Chromium, installing what is missing when this machine allows."""
    missing = code_server.missing_apt_packages()
    if missing and not in_ci():
        why = apt_install(missing)
        if why is not None:
            unavailable(f"real VS Code needs {' '.join(missing)} ({why})")
    elif missing:
        unavailable(f"real VS Code needs {' '.join(missing)}: add them to .ci/run's apt line")
    if not code_server.CHROMIUM.is_file():
        unavailable(f"{code_server.CHROMIUM} is missing: apt-get install -y chromium")
    try:
        return code_server.ensure_code_server()
    except code_server.SetupError as exc:
        unavailable(f"code-server {code_server.CODE_SERVER_VERSION} could not be set up: {exc}")


def _build_vsix(tmp: Path) -> Path:
    """The .vsix, built with editor-clients/README.md's command (npm ci, then vsce package)."""
    npm = shutil.which("npm") or unavailable("npm is missing: install Node.js 20+ with npm")
    npx = shutil.which("npx") or unavailable("npx is missing (it ships with npm)")
    installed = VSCODE / "node_modules" / ".package-lock.json"
    lock = VSCODE / "package-lock.json"
    if not installed.exists() or installed.stat().st_mtime < lock.stat().st_mtime:
        run([npm, "ci", "--no-audit", "--no-fund"], cwd=VSCODE, timeout=600)
    manifest = json.loads((VSCODE / "package.json").read_text(encoding="utf-8"))
    vsix = tmp / f"{manifest['name']}-{manifest['version']}.vsix"
    # --out: the checkout's own .vsix (test_vscode.py builds it too) stays untouched.
    run([npx, "--no", "@vscode/vsce", "package", "--out", os.fspath(vsix)], cwd=VSCODE, timeout=300)
    return vsix


def _toold_script() -> Path:
    """The ``toold`` console script of the interpreter running the tests (a venv's, if any)."""
    script = Path(sysconfig.get_path("scripts")) / "toold"
    if not script.is_file():
        pytest.fail(f"{script} is missing: pip install -e '.[dev]' installs it", pytrace=False)
    return script


def _project_venv(workspace: Path) -> Path:
    """WORKSPACE/.venv/bin/toold, as a Python project that installed toold into its venv has."""
    bin_dir = workspace / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    # Its shebang names this interpreter, so it runs this checkout's toold, in or out of a venv.
    (bin_dir / "toold").symlink_to(_toold_script())
    return bin_dir / "toold"


def _user_settings(user_data: Path) -> None:
    settings = {
        "toold.logLevel": "info",
        "workbench.startupEditor": "none",
        "workbench.tips.enabled": False,
        "workbench.secondarySideBar.defaultVisibility": "hidden",
        "chat.disableAIFeatures": True,
        "telemetry.telemetryLevel": "off",
        "extensions.autoCheckUpdates": False,
        "extensions.autoUpdate": False,
        "update.mode": "none",
        "git.enabled": False,
    }
    folder = user_data / "User"
    folder.mkdir(parents=True)
    (folder / "settings.json").write_text(json.dumps(settings, indent=2), encoding="utf-8")


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


class CodeServerProcess:
    """``code-server`` serving one workspace on a free port of 127.0.0.1."""

    def __init__(self, server: code_server.CodeServer, home: Path, env: dict[str, str]) -> None:
        self.log: list[str] = []
        self.url = ""
        self._ready = threading.Event()
        (home / "config.yaml").write_text("auth: none\n", encoding="utf-8")
        argv = server.argv(
            "--config",
            os.fspath(home / "config.yaml"),
            "--auth",
            "none",
            "--bind-addr",
            "127.0.0.1:0",
            "--disable-telemetry",
            "--disable-update-check",
            "--user-data-dir",
            os.fspath(home / "user-data"),
            "--extensions-dir",
            os.fspath(home / "extensions"),
        )
        self.proc = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            # Its own process group: stop() ends the file watcher and extension hosts too.
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.log.append(line)
            found = LISTENING.search(line)
            if found:
                self.url = found.group(1)
                self._ready.set()
        self._ready.set()

    def wait_listening(self, timeout: float = 120) -> str:
        """The base URL once code-server listens."""
        if not self._ready.wait(timeout) or not self.url:
            pytest.fail(f"code-server did not start:\n{''.join(self.log)}", pytrace=False)
        return self.url

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        # code-server does not always end its children: a file watcher outlived it, holding
        # inotify instances, after two runs of ten here.
        group = self.proc.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGTERM)
        wait_until(lambda: not _group_alive(group), "code-server's processes to exit", 20)
        self._reader.join(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class Session:
    """One person's VS Code window on the test workspace."""

    def __init__(
        self, page: Page, url: str, workspace: Path, model: ModelServer, log: list[str]
    ) -> None:
        self.page = page
        self.url = url
        self.ui = Workbench(page)
        self.workspace = workspace
        self.no_key_workspace = workspace.with_name("no-key-workspace")
        self.venv_toold = workspace / ".venv" / "bin" / "toold"
        self.model = model
        self.log = log
        self.trusted = False


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    server = _set_up()
    home = tmp_path_factory.mktemp("vscode-real")
    vsix = _build_vsix(home)
    workspace = home / "workspace"
    workspace.mkdir()
    (workspace / "toold.toml").write_text('[permissions]\nmode = "default"\n', encoding="utf-8")
    (workspace / "notes.txt").write_text("hello from the workspace\n", encoding="utf-8")
    (workspace / "greeting.txt").write_text("hello, reviewer\n", encoding="utf-8")
    (workspace / "draft.txt").write_text("first draft\n", encoding="utf-8")
    _project_venv(workspace)
    no_key = home / "no-key-workspace"
    no_key.mkdir()
    (no_key / "toold.toml").write_text(
        '[agent]\napi_key_env = "TOOLD_TEST_NO_SUCH_KEY"\n', encoding="utf-8"
    )
    (no_key / ".vscode").mkdir()
    (no_key / ".vscode" / "settings.json").write_text(
        json.dumps({"toold.pythonPath": sys.executable}), encoding="utf-8"
    )
    _user_settings(home / "user-data")
    model = ModelServer()
    # The extension's `toold serve` relays to the workspace's engine, as for a user (not
    # the private daemon the rest of the suite defaults to); the engines live here.
    runtime = home / "rt"
    runtime.mkdir(mode=0o700)
    env = {
        **{k: v for k, v in server.env().items() if k != "TOOLD_NO_DAEMON"},
        "TOOLD_RUNTIME_DIR": os.fspath(runtime),
        "ANTHROPIC_API_KEY": API_KEY,
        "ANTHROPIC_BASE_URL": model.url,
        "XDG_CONFIG_HOME": os.fspath(home / "config"),
        "XDG_DATA_HOME": os.fspath(home / "data"),
    }
    install = server.argv(
        "--user-data-dir",
        os.fspath(home / "user-data"),
        "--extensions-dir",
        os.fspath(home / "extensions"),
        "--install-extension",
        os.fspath(vsix),
    )
    out = subprocess.run(install, env=env, capture_output=True, text=True, timeout=120)
    assert "successfully installed" in out.stdout, out.stdout + out.stderr
    process = CodeServerProcess(server, home, env)
    try:
        url = process.wait_listening()
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=os.fspath(code_server.CHROMIUM), headless=True, args=CHROMIUM_FLAGS
            )
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(WAIT_MS)
            page.goto(f"{url}/?folder={workspace}")
            expect(page.locator(".monaco-workbench")).to_be_visible(timeout=120_000)
            yield Session(page, url, workspace, model, process.log)
            browser.close()
    finally:
        process.stop()
        stop_engines(runtime, env)
        model.close()


@pytest.fixture
def screens(session: Session, request: pytest.FixtureRequest) -> Iterator[Screens]:
    """This test's screenshot folder; its last shot is the window as the test left it."""
    folder = ARTIFACTS / request.node.name
    print(f"screenshots: {folder}")
    request.node.add_report_section("setup", "screenshots", f"{folder}")
    shots = Screens(session.page, folder)
    yield shots
    shots.shot("end")
    # Shown only when the test fails: what code-server itself said lately.
    request.node.add_report_section("teardown", "code-server", "".join(session.log[-40:]))


def _trust(session: Session, screens: Screens | None = None) -> None:
    """Trust the workspace as a person would: Manage Workspace Trust → Trust."""
    ui = session.ui
    ui.command("Workspaces: Manage Workspace Trust")
    trust = ui.page.get_by_role("button", name="Trust", exact=True)
    expect(trust).to_be_visible()
    if screens is not None:
        screens.shot("trust-editor")
    trust.click()
    expect(ui.page.get_by_text("You trust this folder")).to_be_visible()
    ui.close_all_editors()
    session.trusted = True


def _reset(session: Session) -> None:
    """No quick input, no notifications; trusted (for a test run on its own)."""
    session.ui.page.keyboard.press("Escape")
    if not session.trusted:
        _trust(session)
    session.ui.clear_notifications()


@pytest.mark.timeout(2400)  # the first run on a machine installs code-server (about 2 min)
def test_untrusted_workspace_stays_off_until_trusted(session: Session, screens: Screens) -> None:
    ui = session.ui
    expect(ui.page.locator(".statusbar").get_by_text("Restricted Mode")).to_be_visible()
    screens.shot("restricted-mode")
    # untrustedWorkspaces.supported = false: nothing of toold runs in Restricted Mode,
    # not even its contributions: the palette knows no toold command.
    ui.page.keyboard.press("F1")
    ui.quick_input_box.fill(">toold: Run Tool")
    rows = ui.quick_input.locator(".monaco-list-row")
    expect(rows.first).to_be_visible()  # the search has answered (with "similar commands")
    expect(rows.filter(has_text="toold:")).to_have_count(0)
    screens.shot("no-toold-commands")
    ui.page.keyboard.press("Escape")
    expect(ui.status_item(STATUS)).to_have_count(0)
    _trust(session, screens)
    expect(ui.status_item(STATUS)).to_have_count(1)


@pytest.mark.timeout(300)
def test_activation_and_status_bar(session: Session, screens: Screens) -> None:
    ui = session.ui
    _reset(session)
    item = ui.status_item(STATUS)
    expect(item).to_have_attribute("aria-label", re.compile(r"toold: running"), timeout=60_000)
    expect(item).to_contain_text("toold")
    screens.shot("status-running")
    ui.command("toold: Show Log")
    # The channel shows its last lines: the relay's log (started with --stdio), which
    # names the workspace's engine that serves it.
    log = ui.page.get_by_role("document", name="toold - Output")
    expect(log).to_contain_text(f"serving {session.workspace} through its engine")
    # Found where a Python project keeps it, whatever PATH the extension host was given.
    expect(log).to_contain_text(f"Starting {session.venv_toold} (the workspace's .venv)")
    screens.shot("output-channel")


@pytest.mark.timeout(300)
def test_run_tool_read_file_shows_the_result_in_an_editor(
    session: Session, screens: Screens
) -> None:
    ui = session.ui
    _reset(session)
    ui.run_tool("read_file")
    screens.shot("picked-read-file")
    ui.answer(re.compile(r"^read_file — required 1/1: file_path"), "notes.txt")
    ui.check(re.compile(r"^read_file — optional arguments"))
    ui.quick_input_closed()
    expect(ui.active_editor_text()).to_contain_text("hello from the workspace")
    screens.shot("result-editor")


@pytest.mark.timeout(300)
def test_cancel_kills_a_slow_bash_command(session: Session, screens: Screens) -> None:
    ui = session.ui
    _reset(session)
    pid_file = session.workspace / "slow.pid"
    marker = session.workspace / "slow.done"
    ui.run_tool("bash")
    ui.answer(
        re.compile(r"^bash — required 1/1: command"),
        f"echo $$ > slow.pid; {SLOW}; touch slow.done",
    )
    ui.check(re.compile(r"^bash — optional arguments"))
    toast = ui.notification("toold: bash")
    expect(toast).to_contain_text(re.compile(r"tick-\d+"), timeout=WAIT_MS)
    screens.shot("progress-notification")
    assert pid_file.read_text(encoding="utf-8").split()  # the shell has started
    # Seen from the host: inside the default sandbox, $$ is a pid of its own namespace.
    shells = processes_matching("; touch slow.done")
    assert shells
    ui.notification_button(toast, "Cancel").click()
    expect(ui.notification("toold: bash was cancelled.")).to_be_visible()
    screens.shot("cancelled")
    # The shell is gone, so it can never reach `touch slow.done`.
    wait_gone(shells, "the bash process", 20)
    assert not marker.exists()


@pytest.mark.timeout(300)
def test_run_in_background_then_the_jobs_notification(session: Session, screens: Screens) -> None:
    ui = session.ui
    _reset(session)
    ui.command("toold: Run in Background…")
    ui.answer(re.compile(r"^background_run — required 1/1: command"), "echo from-the-job")
    ui.check(re.compile(r"^background_run — optional arguments"))
    submitted = ui.notification(re.compile(r"toold: .*background task"))
    expect(submitted).to_be_visible()
    screens.shot("submitted")
    finished = ui.notification(
        re.compile(r"toold: job \S+ `echo from-the-job` finished \(exit 0\)")
    )
    expect(finished).to_be_visible()
    screens.shot("job-finished")
    ui.notification_button(finished, "Show Output").click()
    expect(ui.active_editor_text()).to_contain_text("from-the-job")
    screens.shot("job-output")


@pytest.mark.timeout(300)
def test_todo_write_updates_the_todos_view(session: Session, screens: Screens) -> None:
    ui = session.ui
    _reset(session)
    ui.page.locator(".activitybar .action-item a[aria-label^='toold']").click()
    expect(ui.page.locator(".pane-header").filter(has_text="Todos")).to_be_visible()
    screens.shot("todos-view-empty")
    ui.run_tool("todo_write")
    ui.answer(re.compile(r"^todo_write — required 1/1: action"), "add")
    ui.check(re.compile(r"^todo_write — optional arguments"), "task")
    ui.answer(re.compile(r"^todo_write — optional 1/1: task"), "drive VS Code for real")
    expect(ui.view_row("Todos", "drive VS Code for real")).to_be_visible()
    screens.shot("todos-view-updated")


@pytest.mark.timeout(300)
def test_set_permission_mode(session: Session, screens: Screens) -> None:
    ui = session.ui
    _reset(session)
    ui.command("toold: Set Permission Mode…")
    ui.pick("toold: Set Permission Mode", "plan")
    expect(ui.notification("permission mode is now “plan”")).to_be_visible()
    expect(ui.status_item(STATUS)).to_have_attribute("aria-label", re.compile(r"plan"))
    screens.shot("mode-plan")
    _reset(session)
    ui.command("toold: Set Permission Mode…")
    ui.pick("toold: Set Permission Mode", "default")
    expect(ui.notification("permission mode is now “default”")).to_be_visible()
    screens.shot("mode-default")


def _ask(session: Session, prompt: str) -> None:
    ui = session.ui
    ui.command("toold: Ask Agent…")
    ui.answer("toold: Ask Agent", prompt)


@pytest.mark.timeout(300)
def test_agent_call_needing_permission_obeys_deny_then_allow(
    session: Session, screens: Screens
) -> None:
    ui, model = session.ui, session.model
    for choice, name in (("Deny", "denied.txt"), ("Allow", "allowed.txt")):
        _reset(session)
        before = len(model.requests)
        model.tool_use(("write_file", {"file_path": name, "content": f"{choice}\n"}))
        model.text(f"The user chose {choice}.")
        _ask(session, f"write {name}")
        expect(ui.dialog()).to_contain_text("allow the agent's tool call?")
        expect(ui.dialog()).to_contain_text("write_file")
        screens.shot(f"permission-modal-{choice.lower()}")
        ui.dialog_button(choice).click()
        expect(ui.markdown_preview()).to_contain_text(f"The user chose {choice}.")
        screens.shot(f"answer-after-{choice.lower()}")
        requests = model.wait_requests(before + 2)
        results = tool_results(requests[before + 1])
        if choice == "Deny":
            assert results[0]["content"] == "User denied."
            assert not (session.workspace / name).exists()
        else:
            assert (session.workspace / name).read_text(encoding="utf-8") == "Allow\n"


def _agent_edits(session: Session, path: str, old: str, new: str) -> None:
    """Ask the agent, whose model reads PATH and then edits OLD into NEW (a permission prompt)."""
    session.model.tool_use(("read_file", {"file_path": path}))
    session.model.tool_use(("edit_file", {"file_path": path, "old_text": old, "new_text": new}))
    session.model.text(f"Edited {path}.")
    _ask(session, f"edit {path}")


@pytest.mark.timeout(300)
def test_an_agent_edit_shows_its_diff_before_allow(session: Session, screens: Screens) -> None:
    ui = session.ui
    _reset(session)
    ui.close_all_editors()
    _agent_edits(session, "greeting.txt", "hello, reviewer", "goodbye, reviewer")
    expect(ui.dialog()).to_contain_text("allow the agent's tool call?")
    # Before anyone answers: VS Code's diff editor on the edit, beside the dialog.
    tab = ui.page.locator(".tab").filter(has_text="toold preview: greeting.txt")
    expect(tab).to_be_visible()
    diff = ui.page.locator(".monaco-diff-editor").first
    expect(diff.locator(".editor.original .view-lines")).to_contain_text("hello, reviewer")
    expect(diff.locator(".editor.modified .view-lines")).to_contain_text("goodbye, reviewer")
    assert (session.workspace / "greeting.txt").read_text(encoding="utf-8") == "hello, reviewer\n"
    screens.shot("diff-beside-the-dialog")
    ui.dialog_button("Allow").click()
    expect(ui.markdown_preview()).to_contain_text("Edited greeting.txt.")
    expect(tab).to_have_count(0)  # answered: the preview's tabs are closed
    text = (session.workspace / "greeting.txt").read_text(encoding="utf-8")
    assert text == "goodbye, reviewer\n"
    screens.shot("allowed-preview-closed")


@pytest.mark.timeout(300)
def test_undo_last_agent_edit_and_the_checkpoints_view(session: Session, screens: Screens) -> None:
    ui = session.ui
    draft = session.workspace / "draft.txt"
    _reset(session)
    _agent_edits(session, "draft.txt", "first draft", "second draft")
    ui.dialog_button("Allow").click()
    expect(ui.markdown_preview()).to_contain_text("Edited draft.txt.")
    assert draft.read_text(encoding="utf-8") == "second draft\n"
    header = ui.page.locator(".pane-header").filter(has_text="Checkpoints")
    if not header.is_visible():  # the toold side bar may be open already: a click would close it
        ui.page.locator(".activitybar .action-item a[aria-label^='toold']").click()
    expect(header).to_be_visible()
    edit = ui.view_row("Checkpoints", "edit_file: draft.txt")
    expect(edit).to_contain_text("agent")
    screens.shot("checkpoints-view")
    edit.click()  # Show Diff: what undoing it would change
    expect(ui.active_tab()).to_contain_text("edit_file.diff")
    expect(ui.active_editor_text()).to_contain_text("-first draft")
    expect(ui.active_editor_text()).to_contain_text("+second draft")
    screens.shot("checkpoint-diff")

    ui.command("toold: Undo Last Agent Edit")
    undid = re.compile(r"toold: undid edit_file \(agent, .*\): restored draft\.txt")
    expect(ui.notification(undid)).to_be_visible()
    assert draft.read_text(encoding="utf-8") == "first draft\n"
    expect(edit).to_contain_text("undone")
    # The open diff document follows: that call is undone now.
    expect(ui.active_editor_text()).to_contain_text("already undone")
    restore = ui.view_row("Checkpoints", "restore: draft.txt")
    expect(restore).to_be_visible()
    screens.shot("undone")

    # A change made outside toold since: Restore (here: redo the undo) asks first.
    draft.write_text("edited by hand\n", encoding="utf-8")
    _reset(session)
    restore.hover()
    restore.locator(".action-label[aria-label='Restore']").click()
    expect(ui.dialog()).to_contain_text("draft.txt changed outside toold")
    screens.shot("conflict-dialog")
    ui.dialog_button("Restore anyway").click()
    redid = re.compile(r"toold: undid restore \(user, .*\): restored draft\.txt")
    expect(ui.notification(redid)).to_be_visible()
    assert draft.read_text(encoding="utf-8") == "second draft\n"
    screens.shot("restored-anyway")


def _agent_writes(session: Session, path: str, content: str, answer: str) -> None:
    """The agent's model has it write PATH (reading it first when it exists); Allow. Its
    ANSWER, different each time, tells this round's markdown preview from the last's."""
    ui = session.ui
    if (session.workspace / path).exists():  # toold overwrites only a file the agent read
        session.model.tool_use(("read_file", {"file_path": path}))
    session.model.tool_use(("write_file", {"file_path": path, "content": content}))
    session.model.text(answer)
    _ask(session, f"write {path}")
    expect(ui.dialog()).to_contain_text("write_file")
    ui.dialog_button("Allow").click()
    expect(ui.markdown_preview()).to_contain_text(answer)
    assert (session.workspace / path).read_text(encoding="utf-8") == content


@pytest.mark.timeout(300)
def test_the_problems_panel_shows_what_the_agents_edit_broke(
    session: Session, screens: Screens
) -> None:
    """The agent writes a .py with an unused import: toold's ruff server (`ruff server`,
    started by the workspace's engine) reports F401 through diagnostics/changed, and the
    extension puts it in the Problems panel (source "toold: Ruff") and as a squiggle; the
    agent's fix clears both."""
    ui = session.ui
    _reset(session)
    ui.close_all_editors()
    _agent_writes(session, "lint_me.py", "import os\n", "Wrote lint_me.py: unused import.")
    ui.command("View: Focus Problems (Errors, Warnings, Infos)")
    panel = ui.page.locator(".markers-panel")
    marker = panel.locator(".monaco-list-row").filter(has_text="`os` imported but unused")
    expect(marker).to_be_visible()
    expect(marker).to_contain_text(re.compile(r"toold: [Rr]uff"))
    expect(marker).to_contain_text("F401")
    expect(marker).to_contain_text("[Ln 1, Col 8]")
    expect(panel.locator(".monaco-list-row").filter(has_text="lint_me.py")).to_be_visible()
    screens.shot("problems-panel")
    marker.click()  # opens the file at the problem
    expect(ui.active_tab()).to_contain_text("lint_me.py")
    editor = ui.page.locator(".editor-group-container.active .monaco-editor")
    expect(editor.locator(".squiggly-warning")).to_have_count(1)
    screens.shot("squiggle")

    _agent_writes(session, "lint_me.py", "import os\n\nprint(os.sep)\n", "Fixed lint_me.py.")
    ui.command("View: Focus Problems (Errors, Warnings, Infos)")
    expect(marker).to_have_count(0)
    expect(panel).to_contain_text("No problems have been detected in the workspace.")
    screens.shot("fixed")

    # Broken again, then toold.diagnostics.show: false (workspace settings) clears it.
    _agent_writes(session, "lint_me.py", "import os\n", "Broke lint_me.py again.")
    ui.command("View: Focus Problems (Errors, Warnings, Infos)")
    expect(marker).to_be_visible()
    settings = session.workspace / ".vscode" / "settings.json"
    settings.parent.mkdir(exist_ok=True)
    settings.write_text(json.dumps({"toold.diagnostics.show": False}), encoding="utf-8")
    try:
        expect(marker).to_have_count(0)
        expect(panel).to_contain_text("No problems have been detected in the workspace.")
        screens.shot("turned-off")
    finally:
        settings.unlink()
    # The editors stay open, as the other steps leave theirs. This step's start closes the
    # last step's: each answer has an untitled name of its own ("toold answer N.md"), so
    # its preview never shows a closed answer of the same name (CI saw that once).


@pytest.mark.timeout(300)
def test_ask_agent_streams_tool_calls_and_previews_the_answer(
    session: Session, screens: Screens
) -> None:
    ui, model = session.ui, session.model
    _reset(session)
    model.tool_use(("read_file", {"file_path": "notes.txt"}))
    gate = model.hold()  # the next model call waits: the tool call's progress stays on screen
    model.text("## Summary\n\nThe notes say **hello from the workspace**.")
    _ask(session, "What do the notes say?")
    toast = ui.notification("toold agent")
    expect(toast).to_contain_text("read_file")
    screens.shot("tool-call-progress")
    gate.set()
    preview = ui.markdown_preview()
    expect(preview.locator("h2")).to_have_text("Summary")
    expect(preview).to_contain_text("The notes say hello from the workspace.")
    expect(preview).to_contain_text("What do the notes say?")
    screens.shot("markdown-preview")


@pytest.mark.timeout(300)
def test_ask_agent_cancel_stops_the_agent(session: Session, screens: Screens) -> None:
    ui, model = session.ui, session.model
    _reset(session)
    before = len(model.requests)
    gate = model.hold()  # the model never answers while the test looks
    _ask(session, "Take your time")
    toast = ui.notification("toold agent")
    expect(toast).to_contain_text("thinking")
    model.wait_requests(before + 1)
    screens.shot("agent-thinking")
    ui.notification_button(toast, "Cancel").click()
    expect(ui.notification("toold: the agent was cancelled.")).to_be_visible()
    screens.shot("agent-cancelled")
    gate.set()


@pytest.mark.timeout(300)
def test_a_teammates_message_reaches_the_user(session: Session, screens: Screens) -> None:
    """team_register, team_spawn and team_send through Run Tool; alice's model has her
    write to main on her own, which reaches the window as team/message. Near the end:
    alice lives on with this window and may ask the shared model queue for more."""
    ui, model = session.ui, session.model
    _reset(session)
    model.tool_use(("team_send", {"to_agent": "main", "content": "hello from alice"}))
    model.text("said hi")
    ui.run_tool("team_register")
    ui.answer(re.compile(r"^team_register — required 1/2: name"), "alice")
    ui.answer(re.compile(r"^team_register — required 2/2: role"), "dev")
    ui.check(re.compile(r"^team_register — optional arguments"))
    expect(ui.active_editor_text()).to_contain_text("alice")
    ui.run_tool("team_spawn")
    ui.answer(re.compile(r"^team_spawn — required 1/1: name"), "alice")
    ui.quick_input_closed()
    ui.run_tool("team_send")
    ui.answer(re.compile(r"^team_send — required 1/2: to_agent"), "alice")
    ui.answer(re.compile(r"^team_send — required 2/2: content"), "say hi to main")
    expect(ui.notification("toold: Message from alice: hello from alice")).to_be_visible()
    screens.shot("team-message")
    expect(ui.active_editor_text()).to_contain_text("Reply from alice: said hi")
    screens.shot("team-send-result")


@pytest.mark.timeout(300)
def test_ask_agent_without_an_api_key_names_the_fix(session: Session, screens: Screens) -> None:
    """Last: the window moves to a second workspace whose toold.toml names an unset key
    variable (a fresh window and daemon, as a person opening another folder)."""
    ui = session.ui
    ui.page.goto(f"{session.url}/?folder={session.no_key_workspace}")
    expect(ui.page.locator(".statusbar").get_by_text("Restricted Mode")).to_be_visible()
    _trust(session)
    expect(ui.status_item(STATUS)).to_have_attribute("aria-label", re.compile(r"toold: running"))
    ui.command("toold: Show Log")
    expect(ui.page.get_by_role("document", name="toold - Output")).to_contain_text(
        f"Starting {sys.executable} -P -m toold (toold.pythonPath)"
    )
    screens.shot("second-workspace")
    _ask(session, "hello")
    error = ui.notification("the agent has no API key (TOOLD_TEST_NO_SUCH_KEY is not set)")
    expect(error).to_contain_text("[agent] api_key_env")
    expect(error).to_contain_text("toold: Restart Daemon")
    screens.shot("no-api-key")
