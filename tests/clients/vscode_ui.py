"""Drive VS Code's workbench (code-server in Chromium) as a person would, with Playwright.

Every step waits on the DOM (locators and expect-style waits with timeouts), never on a
clock. The selectors are VS Code's own workbench classes (quick input, notifications,
dialogs, status bar), stable across the 1.x releases.
"""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Locator, Page, expect

WAIT_MS = 30_000
PALETTE_TRIES = 3
"""Times ``Workbench.command`` opens the palette before giving up."""
#: Debian's Chromium in a container: no sandbox, no GPU, nothing phoning home.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

expect.set_options(timeout=WAIT_MS)


class Screens:
    """Numbered screenshots of one test's steps: ``<folder>/NN-step.png``."""

    def __init__(self, page: Page, folder: Path) -> None:
        self.page = page
        self.folder = folder
        self.count = 0
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.png"):
            old.unlink()

    def shot(self, step: str) -> Path:
        """Save the window now as the next numbered step."""
        self.count += 1
        path = self.folder / f"{self.count:02d}-{step}.png"
        self.page.screenshot(path=path)
        return path


class Workbench:
    """The VS Code window in ``page``."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.quick_input = page.locator(".quick-input-widget")
        self.quick_input_box = self.quick_input.locator("input.input")

    # -- command palette and quick input -----------------------------------------
    def command(self, title: str) -> None:
        """F1, type the command's title, wait for it to be the first match, Enter.

        A palette opened while a loaded window is still registering commands can keep
        the list it first saw, offering only "similar commands": a person closes it and
        opens it again, and so does this (up to ``PALETTE_TRIES`` times).
        """
        first = self.quick_input.locator(".monaco-list-row").first
        for attempt in range(1, PALETTE_TRIES + 1):
            # A palette still closing from the step before would swallow this F1.
            if self.quick_input.is_visible():
                self.page.keyboard.press("Escape")
            expect(self.quick_input).to_be_hidden(timeout=WAIT_MS)
            self.page.keyboard.press("F1")
            wait = WAIT_MS if attempt == PALETTE_TRIES else WAIT_MS // PALETTE_TRIES
            try:
                # An editor a step before opened (a tool's result) can take the focus back
                # from a palette opening meanwhile: a person presses F1 again.
                expect(self.quick_input_box).to_be_focused(timeout=wait)
            except AssertionError:
                if attempt == PALETTE_TRIES:
                    raise
                continue
            try:
                # The editor may also take it a moment after the palette had the focus:
                # the palette closes under the typing, and a person opens it again.
                self.quick_input_box.fill(f">{title}", timeout=wait)
            except PlaywrightError:
                if attempt == PALETTE_TRIES:
                    raise
                continue
            try:
                expect(first).to_have_attribute(
                    "aria-label", re.compile(re.escape(title)), timeout=wait
                )
            except AssertionError:
                if attempt == PALETTE_TRIES:
                    raise
                continue
            self.page.keyboard.press("Enter")
            return

    def wait_title(self, title: str | re.Pattern[str]) -> None:
        """Wait for a quick pick or input box with this title."""
        expect(self.quick_input).to_be_visible(timeout=WAIT_MS)
        expect(self.quick_input.locator(".quick-input-title")).to_have_text(title, timeout=WAIT_MS)

    def run_tool(self, label: str) -> None:
        """*toold: Run Tool…*, then ``label`` in its pick. As with the palette, the editor
        may take the focus back a moment after the pick opened, closing it under the
        typing: a person opens it again."""
        for attempt in range(1, PALETTE_TRIES + 1):
            self.command("toold: Run Tool…")
            try:
                self.wait_title("toold: Run Tool")
                self.quick_input_box.fill(label, timeout=WAIT_MS // 3)
            except (PlaywrightError, AssertionError):
                if attempt == PALETTE_TRIES:
                    raise
                self.page.keyboard.press("Escape")
                continue
            row = self.row(label)
            expect(row).to_be_visible(timeout=WAIT_MS)
            row.click()
            return

    def pick(self, title: str | re.Pattern[str], label: str) -> None:
        """In the quick pick titled ``title``, filter for ``label`` and choose that item."""
        self.wait_title(title)
        self.quick_input_box.fill(label)
        row = self.row(label)
        expect(row).to_be_visible(timeout=WAIT_MS)
        row.click()

    def row(self, label: str) -> Locator:
        """The quick pick row whose label is exactly ``label`` (its aria-label starts so)."""
        rows = self.quick_input.locator(".monaco-list-row")
        return rows.and_(self.page.locator(f'[aria-label="{label}"], [aria-label^="{label}, "]'))

    def check(self, title: str | re.Pattern[str], *labels: str) -> None:
        """In a multi-select quick pick, tick ``labels`` and click OK (none: accept as is)."""
        self.wait_title(title)
        for label in labels:
            row = self.row(label)
            row.locator(".label-name").first.click()
            expect(row).to_have_attribute("aria-checked", "true")
        # OK, not Enter: a markdown preview's webview open behind may hold the keyboard.
        self.quick_input.get_by_role("button", name="OK", exact=True).click()

    def answer(self, title: str | re.Pattern[str], text: str) -> None:
        """Type ``text`` into the input box titled ``title`` and press Enter."""
        self.wait_title(title)
        self.quick_input_box.fill(text)
        self.page.keyboard.press("Enter")

    def quick_input_closed(self) -> None:
        """Wait until no quick input is showing."""
        expect(self.quick_input).to_be_hidden(timeout=WAIT_MS)

    # -- what the window shows ---------------------------------------------------
    def status_item(self, item_id: str) -> Locator:
        """A status-bar entry by its id (``<extension id>.<item>``)."""
        return self.page.locator(f".statusbar-item[id='{item_id}']")

    def notification(self, text: str | re.Pattern[str]) -> Locator:
        """The notification toast showing ``text``."""
        return self.page.locator(".notifications-toasts .notification-toast").filter(has_text=text)

    def notification_button(self, toast: Locator, title: str) -> Locator:
        """A button of a notification toast, by its title."""
        return toast.locator(".monaco-button").filter(has_text=re.compile(rf"^{title}$"))

    def clear_notifications(self) -> None:
        """Notifications: Clear All Notifications, so the next step's toast stands alone."""
        self.command("Notifications: Clear All Notifications")
        expect(self.page.locator(".notifications-toasts .notification-toast")).to_have_count(
            0, timeout=WAIT_MS
        )

    def dialog(self) -> Locator:
        """The modal dialog."""
        return self.page.locator(".monaco-dialog-box")

    def dialog_button(self, title: str) -> Locator:
        """A button of the modal dialog, by its title."""
        return self.dialog().locator(".monaco-button").filter(has_text=re.compile(rf"^{title}$"))

    def close_all_editors(self) -> None:
        """View: Close All Editors, answering Don't Save for the results' untitled editors."""
        self.command("View: Close All Editors")
        empty = self.page.locator(".editor-group-container.active.empty")
        dont_save = self.dialog_button("Don't Save")
        # Untitled editors holding text are dirty: VS Code asks first, as it would a person.
        expect(empty.or_(dont_save).first).to_be_visible(timeout=WAIT_MS)
        if dont_save.is_visible():
            dont_save.click()
        expect(empty).to_be_visible(timeout=WAIT_MS)

    def active_editor_text(self) -> Locator:
        """The lines of the active editor."""
        return self.page.locator(".editor-group-container.active .monaco-editor .view-lines")

    def active_tab(self) -> Locator:
        """The active editor's tab."""
        return self.page.locator(".editor-group-container.active .tab.active")

    def markdown_preview(self) -> Locator:
        """The body of the markdown preview's webview (two iframes deep)."""
        return (
            self.page.frame_locator("iframe.webview.ready")
            .frame_locator("iframe#active-frame")
            .locator("body")
        )

    def view_row(self, view_title: str, text: str) -> Locator:
        """A tree row in the side-bar view titled ``view_title``."""
        pane = self.page.locator(".pane").filter(
            has=self.page.locator(".pane-header", has_text=view_title)
        )
        return pane.locator(".monaco-list-row").filter(has_text=text)
