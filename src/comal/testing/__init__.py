"""Fakes for tests of code that calls models — comal's own tests and yours.

- :class:`ScriptedProvider` answers each call with the next reply of a script, records the
  requests in ``.calls``, raises :class:`ScriptExhausted` when asked for more than the script
  holds, and ``assert_complete()`` fails when replies are left over.
- :class:`FunctionProvider` answers each call with ``fn(request)``.
- :class:`FakeServer` is a real HTTP server on ``127.0.0.1`` (ephemeral port, background
  thread) that speaks the Anthropic Messages, OpenAI Chat Completions and OpenAI Responses wire
  formats, and any wire protocol a plugin registers, whole and streamed, from the same script,
  and records every request it receives. Point the real adapters (or any SDK client) at it to
  test the whole path without the network; ``python -m comal.testing SCRIPT --port N`` runs
  one as a process of its own (docs/usage.md, "A fake model for your own tests").
- :func:`cache_prefix` / :func:`cache_serialization` show what Anthropic's prompt cache keys on,
  to assert that consecutive requests keep their cached prefix byte for byte (CCH-1).

Script format
-------------
The replies a fake answers with are written in the script format of
:mod:`comal.providers.script` (Anthropic Messages form, one JSON object per reply; a file has
one per line), which :class:`ScriptedProvider`, ``--model script:PATH`` and :class:`FakeServer`
all read.

:class:`FakeServer` converts each reply to the route's format: text and ``thinking`` become the
message text and ``reasoning_content`` (Chat) or ``output_text`` and ``reasoning`` items
(Responses); ``tool_use`` becomes a function call whose arguments are ``json.dumps(input)``;
``max_tokens`` becomes ``length`` / ``incomplete``; usage becomes ``prompt_tokens`` (with
``cached_tokens`` only when the script gives a cache read) or Responses ``input_tokens``. A
plugin's protocol gets the reply as a canonical message in its own content shape, its usage
normalized and written in its own shape, and the script's ``stop_reason`` as it is. In
process, :class:`ScriptedProvider` raises for an error entry what an adapter raises once its
retries are spent — a retry of ``rate_limit`` is only visible through :class:`FakeServer`.
"""

from ..providers.script import ERROR_KINDS, ScriptedProvider, ScriptExhausted, load_script
from ._fake_wire import cache_prefix, cache_serialization
from ._providers import FunctionProvider, last_user_text
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
