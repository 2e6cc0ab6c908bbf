"""A client's conversation through ``comal serve``, in each wire format, whole or streamed.

Each :class:`Talk` holds one conversation's history as its client keeps it and speaks through
an official SDK (Anthropic, OpenAI chat completions, OpenAI responses). :meth:`Talk.send` makes
one call from the history as it stands, without changing it, so a call that failed is retried
by calling it again: the SDK sends the same bytes, as a client retrying after a crash does.
:meth:`Talk.accept` then takes the reply into the history (and answers its tool calls).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai
from anthropic import _base_client as _anthropic_client
from openai import _base_client as _openai_client

__all__ = ["BROKEN", "FORMATS", "Reply", "Talk", "client_for", "said", "script_entry"]

# What a client gets when the proxy died or dropped it: an error status, a connection refused or
# reset, a stream cut short (raised as it is read, by the SDKs' HTTP library).
BROKEN: tuple[type[Exception], ...] = (
    anthropic.APIError,
    openai.APIError,
    _anthropic_client.httpx2.HTTPError,
    _openai_client.httpx2.HTTPError,
)
# (protocol, streamed): every way a client talks to the proxy.
FORMATS = [
    (protocol, stream)
    for protocol in ("anthropic", "openai_chat", "openai_responses")
    for stream in (False, True)
]
_SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}


def script_entry(k: int, *, tool: bool) -> dict[str, Any]:
    """The upstream's ``k``-th reply: a text unique to it, with a tool call when ``tool``."""
    content: list[dict[str, Any]] = [{"type": "text", "text": f"reply-{k}"}]
    if tool:
        content.append(
            {"type": "tool_use", "id": f"call_{k}", "name": "lookup", "input": {"q": f"q{k}"}}
        )
    return {"content": content, "usage": {"input_tokens": 20 + k, "output_tokens": 3}}


def said(message: Any) -> str:
    """A stored message's text parts (its words, without its tool calls)."""
    return "".join(p.text for p in message.parts if type(p).__name__ == "Text")


@dataclass
class Reply:
    text: str
    calls: list[str]  # the ids of its tool calls
    raw: Any


@dataclass
class Talk:
    """One conversation: the client, its wire format and its history."""

    client: Any
    protocol: str
    stream: bool
    name: str
    history: list[dict[str, Any]] = field(default_factory=list)
    turns: int = 0
    result_lines: int = 1  # how long each tool result is (long ones the engine stands in for)

    def __post_init__(self) -> None:
        if not self.history:
            self.history.append({"role": "user", "content": f"{self.name}: begin"})

    # -- one call, the history unchanged --------------------------------------------------------
    def send(self) -> Reply:
        return {
            "anthropic": self._anthropic,
            "openai_chat": self._chat,
            "openai_responses": self._responses,
        }[self.protocol]()

    def _anthropic(self) -> Reply:
        tools = [{"name": "lookup", "description": "look up", "input_schema": _SCHEMA}]
        kw: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 256}
        kw |= {"messages": self.history, "tools": tools, "system": "be brief"}
        if self.stream:
            with self.client.messages.stream(**kw) as s:
                message = s.get_final_message()
        else:
            message = self.client.messages.create(**kw)
        text = "".join(b.text for b in message.content if b.type == "text")
        calls = [b.id for b in message.content if b.type == "tool_use"]
        return Reply(text, calls, message)

    def _chat(self) -> Reply:
        tools = [{"type": "function", "function": {"name": "lookup", "parameters": _SCHEMA}}]
        messages = [{"role": "system", "content": "be brief"}, *self.history]
        kw: dict[str, Any] = {"model": "gpt-4o", "messages": messages, "tools": tools}
        if self.stream:
            kw["stream_options"] = {"include_usage": True}
            with self.client.chat.completions.stream(**kw) as s:
                completion = s.get_final_completion()
        else:
            completion = self.client.chat.completions.create(**kw)
        message = completion.choices[0].message
        calls = [c.id for c in message.tool_calls or ()]
        return Reply(message.content or "", calls, message)

    def _responses(self) -> Reply:
        tools = [{"type": "function", "name": "lookup", "parameters": _SCHEMA}]
        kw: dict[str, Any] = {"model": "gpt-4.1", "input": self.history, "tools": tools}
        kw["instructions"] = "be brief"
        if self.stream:
            with self.client.responses.stream(**kw) as s:
                response = s.get_final_response()
        else:
            response = self.client.responses.create(**kw)
        calls = [o.call_id for o in response.output if o.type == "function_call"]
        return Reply(response.output_text, calls, response)

    # -- the reply taken into the history -------------------------------------------------------
    def _output(self, call: str) -> str:
        return "\n".join(f"result of {call}, line {n}" for n in range(self.result_lines))

    def accept(self, reply: Reply) -> None:
        self.turns += 1
        if self.protocol == "anthropic":
            content = [b.model_dump(exclude_none=True) for b in reply.raw.content]
            self.history.append({"role": "assistant", "content": content})
            if reply.calls:
                results = [
                    {"type": "tool_result", "tool_use_id": c, "content": self._output(c)}
                    for c in reply.calls
                ]
                self.history.append({"role": "user", "content": results})
        elif self.protocol == "openai_chat":
            message = reply.raw.model_dump(exclude_none=True)
            message = {k: v for k, v in message.items() if k in ("role", "content", "tool_calls")}
            self.history.append(message)
            for c in reply.calls:
                self.history.append({"role": "tool", "tool_call_id": c, "content": self._output(c)})
        else:
            for item in reply.raw.output:
                self.history.append(item.model_dump(exclude_none=True))
            for c in reply.calls:
                output = {"type": "function_call_output", "call_id": c, "output": self._output(c)}
                self.history.append(output)
        if not reply.calls:
            self.history.append({"role": "user", "content": f"{self.name}: go on ({self.turns})"})


def client_for(protocol: str, url: str, **settings: Any) -> Any:
    """An official SDK client on ``url`` (the proxy), without retries of its own unless asked."""
    settings = {"api_key": "sk-test", "max_retries": 0, "timeout": 20.0, **settings}
    if protocol == "anthropic":
        return anthropic.Anthropic(base_url=url, **settings)
    return openai.OpenAI(base_url=f"{url}/v1", **settings)
