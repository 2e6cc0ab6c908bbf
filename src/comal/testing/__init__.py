"""Fakes for tests of code that calls models — comal's own tests and yours.

- :class:`ScriptedProvider` answers each call with the next reply of a script, records the
  requests in ``.calls``, raises :class:`ScriptExhausted` when asked for more than the script
  holds, and ``assert_complete()`` fails when replies are left over.
- :class:`FunctionProvider` answers each call with ``fn(request)``.
- :class:`FakeServer` is a real HTTP server on ``127.0.0.1`` (ephemeral port, background
  thread) that speaks the Anthropic Messages, OpenAI Chat Completions and OpenAI Responses wire
  formats, whole and streamed, from the same script, and records every request it receives. Point
  the real adapters (or any SDK client) at it to test the whole path without the network.
- :func:`cache_prefix` / :func:`cache_serialization` show what Anthropic's prompt cache keys on,
  to assert that consecutive requests keep their cached prefix byte for byte (CCH-1).

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

:class:`FakeServer` converts each reply to the route's format: text and ``thinking`` become the
message text and ``reasoning_content`` (Chat) or ``output_text`` and ``reasoning`` items
(Responses); ``tool_use`` becomes a function call whose arguments are ``json.dumps(input)``;
``max_tokens`` becomes ``length`` / ``incomplete``; usage becomes ``prompt_tokens`` (with
``cached_tokens`` only when the script gives a cache read) or Responses ``input_tokens``. In
process, :class:`ScriptedProvider` raises for an error entry what an adapter raises once its
retries are spent — a retry of ``rate_limit`` is only visible through :class:`FakeServer`.
"""

from ._fake_wire import cache_prefix, cache_serialization
from ._providers import FunctionProvider, ScriptedProvider, ScriptExhausted, last_user_text
from ._script import ERROR_KINDS, load_script
from ._server import FakeServer, RecordedRequest

__all__ = [
    "ERROR_KINDS",
    "FakeServer",
    "FunctionProvider",
    "RecordedRequest",
    "ScriptExhausted",
    "ScriptedProvider",
    "cache_prefix",
    "cache_serialization",
    "last_user_text",
    "load_script",
]
