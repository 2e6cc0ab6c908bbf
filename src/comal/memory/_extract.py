"""The deterministic fact extractor: what is worth remembering of some entries, without a model.

It reads each entry's visible text and keeps, each fact linked to the entries it came from:

- ``command``: a command a tool call ran (the call's ``command``/``cmd``/``script`` argument)
  with the exit code its result reports, and the result's first error line when it failed;
- ``decision``: a sentence that states a choice or a plan (``decided``, ``let's``, ``I'll``,
  ``instead``, ``the fix is`` …);
- ``preference``: a sentence that states a liking or a rule (``I love``, ``prefer``, ``my
  favorite``, ``always use``, ``please never`` …);
- ``date``: a sentence naming a date or a day (ISO dates, month names, weekdays, ``yesterday``,
  ``last week`` …);
- ``name``: the proper names an entry mentions (capitalized words not opening a sentence);
- ``path`` and ``identifier``: the paths and identifiers an entry names (the patterns of the
  extractive summarizer, :func:`comal.context.exact_values`' own).

Sentences are stated with who said them (the message's name, else its role). Everything is
bounded: a sentence at :data:`SENTENCE_CHARS`, a list at :data:`LIST_VALUES` values, an entry
at :data:`PER_ENTRY` sentence facts, a tool output read in its first :data:`OUTPUT_CHARS`, and
one call at :data:`MAX_FACTS` facts, the most useful kinds first. The same entries always give
the same facts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ..context import command_of, exit_code
from ..context._extractive import IDENT, PATH
from ..ledger import Entry, MemoryInput
from ..messages import Role, Text

__all__ = ["KINDS", "MAX_FACTS", "bounded", "extract_facts"]

KINDS = ("command", "decision", "preference", "date", "name", "path", "identifier")
MAX_FACTS = 400
PER_ENTRY = 4
SENTENCE_CHARS = 300
LIST_VALUES = 12
OUTPUT_CHARS = 4_000
_MIN_SENTENCE = 12

_DECISION = re.compile(
    r"(?i)\b(?:decid\w*|chose|choos\w+|let's|we(?:'ll| will| should)|i(?:'ll| will)|"
    r"going to|plan(?:ned|ning)? to|instead|agreed?|the (?:fix|cause|problem|plan) (?:is|was)|"
    r"we need to|from now on)\b"
)
_PREFERENCE = re.compile(
    r"(?i)\b(?:i (?:really |just |also )?(?:like|love|prefer|enjoy|adore|hate|dislike|"
    r"can't stand)|(?:my|our) fav(?:ou)?rite|prefer(?:s|red|ence)?|always use|never use|"
    r"please (?:always|never|don't|do not)|i'm (?:a (?:big )?fan|into|passionate)|"
    r"(?:don't|do not) like)\b"
)
_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_DATE = re.compile(
    rf"(?i)\b(?:\d{{4}}-\d{{2}}-\d{{2}}|\d{{1,2}}/\d{{1,2}}/\d{{2,4}}|"
    rf"(?:{_MONTHS})\.? \d{{1,2}}(?:st|nd|rd|th)?(?:,? \d{{4}})?|"
    rf"\d{{1,2}}(?:st|nd|rd|th)? (?:of )?(?:{_MONTHS})\b(?:,? \d{{4}})?|"
    rf"(?:in|since|by|until|last|next|this) (?:{_MONTHS})\b|(?:{_MONTHS}) \d{{4}}|"
    r"(?:mon|tues|wednes|thurs|fri|satur|sun)day|yesterday|tomorrow|tonight|"
    r"(?:last|next|this) (?:week|weekend|month|year|summer|winter|spring|fall|autumn)|"
    r"\d+ (?:days?|weeks?|months?|years?) ago|in \d{4})\b"
)
_NAME = re.compile(r"\b[A-Z][a-z]{2,}(?:[ \t]+[A-Z][a-z]{2,})*\b")
_NOT_NAMES = frozenset(
    "The This That These Those There Then Than What When Where Which Who Why How Yes Yeah "
    "Thanks Thank Hello Hey Wow Okay Sure Well Also And But Not Just Let Its Our Your Their "
    "Great Good Nice Cool Awesome Sounds Really Maybe Please Sorry Here Now Today Tomorrow "
    "Yesterday Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February "
    "March April May June July August September October November December None True False "
    "Error Traceback File Line".split()
)
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
_ERROR = re.compile(r"(?:\b[A-Z]\w*(?:Error|Exception)\b|\bFAIL(?:ED)?\b|\berror:|\bfatal\b)")
_PRIORITY = {k: i for i, k in enumerate(KINDS)}


def _clean(text: str) -> str:
    """One line, storable in any ledger column: no NUL, no lone surrogate."""
    flat = " ".join(text.split())
    return flat.encode("utf-8", "replace").decode("utf-8").replace("\x00", "\ufffd")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _who(e: Entry) -> str:
    return f"{e.message.name} ({e.role})" if e.message.name else e.role


def _listed(values: Iterable[str]) -> str:
    kept = list(dict.fromkeys(values))
    more = len(kept) - LIST_VALUES
    return ", ".join(kept[:LIST_VALUES]) + (f" (+{more} more)" if more > 0 else "")


def _sentence_facts(e: Entry, text: str) -> list[MemoryInput]:
    out: list[MemoryInput] = []
    for raw in _SENTENCES.split(text):
        sentence = _clean(raw)
        if len(sentence) < _MIN_SENTENCE:
            continue
        for kind, pattern in (("decision", _DECISION), ("preference", _PREFERENCE),
                              ("date", _DATE)):  # fmt: skip
            if pattern.search(sentence):
                said = f"{_who(e)}: {_cut(sentence, SENTENCE_CHARS)}"
                out.append(MemoryInput(kind, said, (e.seq,)))
                break
        if len(out) >= PER_ENTRY:
            break
    return out


def _names(e: Entry, text: str) -> list[str]:
    """Capitalized words that do not open their sentence (those are any word at all)."""
    speaker = e.message.name or ""
    found = []
    for sentence in _SENTENCES.split(text):
        sentence = sentence.strip()
        for m in _NAME.finditer(sentence):
            if m.start() == 0:
                continue
            name = " ".join(w for w in m.group(0).split() if w not in _NOT_NAMES)
            if name and name != speaker:
                found.append(name)
    return found


def _entry_facts(e: Entry, results: dict[str, Entry]) -> list[MemoryInput]:
    m = e.message
    result = m.tool_result
    out: list[MemoryInput] = []
    if result is not None:
        text = result.text[:OUTPUT_CHARS]
        paths = PATH.findall(text)
        if paths:
            out.append(MemoryInput("path", f"paths in a {result.name or 'tool'} result: "
                             f"{_listed(paths)}", (e.seq,)))  # fmt: skip
        return out
    text = "\n".join(p.text for p in m.parts if isinstance(p, Text))
    out += _sentence_facts(e, text)
    names = _names(e, text)
    if names:
        out.append(MemoryInput("name", f"{_who(e)} mentioned {_listed(names)}", (e.seq,)))
    calls = " ".join(c.arguments for c in m.tool_calls)
    paths = PATH.findall(text) + PATH.findall(calls)
    if paths:
        out.append(MemoryInput("path", f"{_who(e)} named {_listed(paths)}", (e.seq,)))
    idents = [v for v in IDENT.findall(f"{text} {calls}") if v not in set(paths)]
    if idents:
        out.append(MemoryInput("identifier", f"{_who(e)} named {_listed(idents)}", (e.seq,)))
    for call in m.tool_calls:
        command = command_of(call.arguments)
        if command is None:
            continue
        shown = _cut(_clean(command), SENTENCE_CHARS)
        answer = results.get(call.id)
        if answer is None or answer.message.tool_result is None:
            out.append(MemoryInput("command", f"ran `{shown}` (no result seen)", (e.seq,)))
            continue
        output = answer.message.tool_result.text
        code = exit_code(output)
        status = f"exit {code}" if code is not None else "exit not shown"
        failed = answer.message.tool_result.is_error or (code not in (None, "0"))
        line = next((ln for ln in output.split("\n") if _ERROR.search(ln)), "") if failed else ""
        said = f"ran `{shown}` → {status}" + (f": {_cut(_clean(line), 200)}" if line else "")
        out.append(MemoryInput("command", said, (e.seq, answer.seq)))
    return out


def extract_facts(entries: Sequence[Entry]) -> list[MemoryInput]:
    """The facts of ``entries`` (see the module docstring), in seq order."""
    results = {
        r.call_id: e for e in entries if (r := e.message.tool_result) is not None and r.call_id
    }
    found: list[MemoryInput] = []
    for e in entries:
        if e.role in (Role.SYSTEM.value, Role.DEVELOPER.value):
            continue
        found += _entry_facts(e, results)
    facts = [MemoryInput(f.kind, f.text, f.seqs) for f in found if f.text.strip()]
    return bounded(list({(f.kind, f.text): f for f in facts}.values()))


def bounded(facts: Sequence[MemoryInput]) -> list[MemoryInput]:
    """At most :data:`MAX_FACTS` of ``facts``, the most useful kinds first, in seq order."""
    kept = list(facts)
    if len(kept) > MAX_FACTS:
        kept = sorted(kept, key=lambda f: (_PRIORITY.get(f.kind, len(KINDS)), f.seqs))
        kept = kept[:MAX_FACTS]
    return sorted(kept, key=lambda f: (f.seqs[0], _PRIORITY.get(f.kind, len(KINDS))))
