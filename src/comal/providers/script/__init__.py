"""Scripts: model replies written in advance, and the providers that follow them.

- :class:`ScriptedProvider` answers each call with the next reply of a script, in process;
- :class:`ScriptModel` is ``--model script:PATH``: a session's k-th model call gets the k-th
  reply, k read from the session's ledger, so a resumed session continues where it stopped;
  :class:`~._plugin.ScriptScheme` registers it as the built-in ``script`` scheme;
- :func:`load_script` reads a script file, :func:`response_from_entry` renders one reply as the
  :class:`~comal.providers.ModelResponse` an Anthropic provider would return.

:mod:`comal.testing` re-exports the first and the last two for tests, beside its
:class:`~comal.testing.FakeServer`, which serves the same scripts over HTTP.

Script format
-------------
One JSON object per reply, in Anthropic Messages form; a script file (:func:`load_script`) has
one per line, and blank lines and lines starting with ``#`` are skipped::

    # a plain answer; usage is optional and is reported as given (missing counts are unknown)
    {"content": [{"type": "text", "text": "Hello."}], "stop_reason": "end_turn",
     "usage": {"input_tokens": 12, "output_tokens": 3}}
    # a tool call; stop_reason defaults to "tool_use" when there is one, else "end_turn"
    {"content": [{"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}}]}
    # shorthand for one text block
    {"content": "Done."}
    # an answer cut off by the output limit (OUTPUT_LENGTH)
    {"content": "The list: 1, 2,", "stop_reason": "max_tokens"}
    # failures, in each provider's real error shape
    {"error": "context_length"}
    {"error": "rate_limit"}
    {"error": {"status": 418, "body": {"error": {"message": "teapot"}}, "headers": {}}}

Keys: ``content`` (a string or Anthropic content blocks: ``text``, ``tool_use``, ``thinking``
with optional ``signature``, ``redacted_thinking``), ``stop_reason`` (Anthropic's:
``end_turn``, ``tool_use``, ``max_tokens``, ``stop_sequence``, ``refusal``,
``model_context_window_exceeded``), ``usage`` (Anthropic's: ``input_tokens``, ``output_tokens``,
``cache_read_input_tokens``, ``cache_creation_input_tokens``), and optionally ``model`` and
``id``. Or ``error``: one of ``context_length``, ``rate_limit`` (429), ``server`` (500),
``overloaded`` (529 / 503), ``bad_request`` (400), ``auth`` (401), or a custom ``{status,
body, headers}``; ``"flavor": "vllm"`` or ``"llamacpp"`` gives a ``context_length`` error the
shape of that server on the Chat Completions route.
"""

from ._format import (
    ERROR_KINDS,
    Entry,
    Reply,
    blocks,
    check_entry,
    entries,
    error_from_entry,
    error_reply,
    load_script,
    response_from_entry,
    stop_reason,
)
from ._model import SCRIPT_PREFIX, ScriptEnded, ScriptModel
from ._scripted import ScriptedProvider, ScriptExhausted

__all__ = [
    "ERROR_KINDS",
    "SCRIPT_PREFIX",
    "Entry",
    "Reply",
    "ScriptEnded",
    "ScriptExhausted",
    "ScriptModel",
    "ScriptedProvider",
    "blocks",
    "check_entry",
    "entries",
    "error_from_entry",
    "error_reply",
    "load_script",
    "response_from_entry",
    "stop_reason",
]
