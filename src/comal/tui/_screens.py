"""The TUI's dialogs: approving one call, and picking one of a list (a model, a session).

What they show of a call is the model's text: escaped before any widget sees it
(:func:`comal.safe_text.safe`), never read as markup.
"""

from __future__ import annotations

import json
from typing import ClassVar

from rich.text import Text as RichText
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, OptionList, Static
from textual.widgets.option_list import Option

from ..ops import ApprovalRequest, Rule
from ..safe_text import safe, safe_command

__all__ = ["ALWAYS", "DENY", "ONCE", "ApprovalScreen", "PickerScreen", "diff_text"]

# Approval answers: allow this call, allow calls like it for the rest of the session, deny.
ONCE, ALWAYS, DENY = "once", "always", "deny"
_DIFF_STYLES = (("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))


def diff_text(diff: str) -> RichText:
    """A unified diff, escaped, each line coloured by what it does."""
    out = RichText()
    for line in diff.split("\n"):
        style = next((s for prefix, s in _DIFF_STYLES if line.startswith(prefix)), "")
        out.append(safe(line) + "\n", style=style)
    out.rstrip()
    return out


def _what(request: ApprovalRequest) -> RichText:
    """What the call does: the diff of a Write or Edit, the command of a shell call, else its
    arguments."""
    if request.change is not None:
        return diff_text(request.change)
    command = request.arguments.get("command")
    if isinstance(command, str):
        return RichText("$ " + safe_command(command), style="bold")
    args = json.dumps(dict(request.arguments), ensure_ascii=False, sort_keys=True, indent=1)
    return RichText(safe_command(args))


class ApprovalScreen(ModalScreen[str]):
    """Allow once (y), always for this session (a), or deny (n) one proposed call."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", f"answer('{ONCE}')", "allow once"),
        Binding("a", f"answer('{ALWAYS}')", "always allow"),
        Binding("n", f"answer('{DENY}')", "deny"),
    ]
    DEFAULT_CSS = """
    ApprovalScreen { align: center middle; }
    #dialog { width: 90%; height: auto; max-height: 90%; border: thick $warning; padding: 1 2;
              background: $panel; }
    #change { height: auto; max-height: 24; border: round $primary-darken-2; }
    #buttons { height: auto; margin-top: 1; }
    """

    def __init__(self, request: ApprovalRequest, always: Rule | None) -> None:
        super().__init__()
        self.request = request
        self.always = always

    def compose(self) -> ComposeResult:
        request = self.request
        path = request.arguments.get("path")
        subject = f" {safe(path)}" if isinstance(path, str) else ""
        with Vertical(id="dialog"):
            yield Static(f"Approve {safe(request.operation)}{subject}?", id="title", markup=False)
            with VerticalScroll(id="change"):
                yield Static(_what(request), id="request")
            kinds = ", ".join(e.kind for e in request.effects) or "none"
            why = f"{request.actor.kind} {request.actor.id} proposes it · effects: {kinds} · "
            why += f"asked by rule {request.rule}"
            why += f" ({request.reason})" if request.reason else ""
            yield Static(safe(why), id="why", markup=False)
            if self.always is not None:
                # The rule holds the call's subject (a path, a command): the model's text.
                rule = safe(str(self.always))
                yield Static(f"always: adds the rule allow {rule}", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Allow once (y)", id=ONCE, variant="success")
                if self.always is not None:
                    yield Button("Always (a)", id=ALWAYS, variant="primary")
                yield Button("Deny (n)", id=DENY, variant="error")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id or DENY)

    def action_answer(self, answer: str) -> None:
        if answer == ALWAYS and self.always is None:
            return
        self.dismiss(answer)


class PickerScreen(ModalScreen[str | None]):
    """One of ``choices`` (value, label), or ``None`` on escape."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]
    DEFAULT_CSS = """
    PickerScreen { align: center middle; }
    #picker { width: 80%; height: auto; max-height: 80%; border: thick $primary; padding: 0 1;
              background: $panel; }
    #choices { height: auto; max-height: 20; }
    """

    def __init__(self, title: str, choices: list[tuple[str, str]], current: str | None) -> None:
        super().__init__()
        self.title_text = title
        self.choices = choices
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Static(self.title_text + "  (enter picks, escape cancels)", markup=False)
            options = [Option(RichText(safe(label)), id=value) for value, label in self.choices]
            yield OptionList(*options, id="choices")

    def on_mount(self) -> None:
        picker = self.query_one(OptionList)
        values = [value for value, _ in self.choices]
        if self.current in values:
            picker.highlighted = values.index(self.current)
        picker.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
