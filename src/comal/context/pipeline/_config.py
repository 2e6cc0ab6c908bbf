"""Settings of the pipeline engine (PIP-1..4, CFG-1): the source's defaults and ranges.

Field names are snake_case; every setting the source documents also answers to its camelCase
name (``thinkingKeepTurns``, ``historyTurns``, ...), so a configuration file written for it
validates here unchanged. Settings the source does not name (the head cap, the tail a summary
keeps, the tool families) are comal's and say so in their descriptions.
"""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from ...tokens import TokenCounter, default_counter
from .._summarizer import SummarizerPlan

__all__ = ["PipelineConfig", "ToolNames"]

ToolNames = frozenset[str]

TurnCount = Annotated[int, Field(ge=3, le=100)]


class PipelineConfig(BaseModel):
    """Settings of the ``pipeline`` engine. Frozen: an engine run never mutates them."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", arbitrary_types_allowed=True, populate_by_name=True
    )

    # -- layer 1: old thinking blocks ----------------------------------------------------------
    thinking_keep_turns: int = Field(
        10, ge=1, le=50, alias="thinkingKeepTurns",
        description="Recent model turns that keep their reasoning blocks.",
    )  # fmt: skip
    # -- layer 3: recent user turns ------------------------------------------------------------
    history_turns: int = Field(
        15, ge=3, le=100, alias="historyTurns",
        description="Recent user turns kept in full (older ones leave the assembly).",
    )  # fmt: skip
    history_turn_overrides: dict[str, TurnCount] = Field(
        default_factory=dict, alias="historyTurnOverrides",
        description="Per-channel turn limits, e.g. {dm: 10, group: 5}.",
    )  # fmt: skip
    channel: str | None = Field(
        None, description="The channel this agent serves (chooses historyTurnOverrides)."
    )
    # -- layer 4: superseded content -----------------------------------------------------------
    eviction_min_age: int = Field(
        15, ge=3, le=50, alias="evictionMinAge",
        description="Model turns after which a tool error is evicted.",
    )  # fmt: skip
    # -- layers 5 and 6: observation masking and Tier-0 micro-compaction -----------------------
    observation_keep_window: int = Field(
        25, ge=1, le=50, alias="observationKeepWindow",
        description="Recent tool uses that keep their full results.",
    )  # fmt: skip
    observation_trigger_chars: int = Field(
        120_000, ge=50_000, le=1_000_000, alias="observationTriggerChars",
        description="History characters above which old tool results are masked.",
    )  # fmt: skip
    observation_deactivation_chars: int = Field(
        80_000, ge=20_000, le=500_000, alias="observationDeactivationChars",
        description="History characters below which masking switches off again.",
    )  # fmt: skip
    ephemeral_keep_window: int = Field(
        10, ge=1, le=50, alias="ephemeralKeepWindow",
        description="Recent ephemeral (web) tool results kept from masking.",
    )  # fmt: skip
    # Batched by default: each age-based edit rewrites the cached prefix from that result on,
    # and edits every turn cost more than they save (comal bench compare, 32k/45k: stride 1
    # loses to limit on Anthropic, stride 10 wins at 32k); compact rarely and deep.
    edit_stride_turns: int = Field(
        10, ge=1, le=50, alias="editStrideTurns",
        description=(
            "comal: age-based edits (thinking, errors, masking, Tier-0) land every N model "
            "turns, so the cached prefix is rewritten at most that often."
        ),
    )  # fmt: skip
    # -- layer 7: large results ----------------------------------------------------------------
    inline_chars: int = Field(
        8_000, ge=1_000, le=100_000,
        description="Results longer than this are sent head + tail (PIP-3's default cap).",
    )  # fmt: skip
    large_inline_chars: int = Field(
        15_000, ge=1_000, le=100_000,
        description="The cap for file reads and MCP tools (PIP-3).",
    )  # fmt: skip
    # -- layer 8: the summary (middle-out) -----------------------------------------------------
    compaction_trigger_ratio: float = Field(
        0.85, ge=0.3, le=0.95, alias="compactionTriggerRatio",
        description="Share of the input limit above which older history is summarized.",
    )  # fmt: skip
    compaction_cooldown_turns: int = Field(
        5, ge=1, le=50, alias="compactionCooldownTurns",
        description="Model turns to wait before summarizing again.",
    )  # fmt: skip
    compaction_prefix_anchor_turns: int = Field(
        2, ge=0, le=10, alias="compactionPrefixAnchorTurns",
        description="User turns kept untouched at the head for cache prefix stability.",
    )  # fmt: skip
    compaction_model: str = Field(
        "", alias="compactionModel",
        description="Model that writes summaries (empty: the extractive summarizer).",
    )  # fmt: skip
    prefix_anchor_max_ratio: float = Field(
        0.2, ge=0, le=0.5,
        description="comal: the head may take at most this share of the history capacity.",
    )  # fmt: skip
    # 0.2 measured on the corpus (bench compare at 32k/45k): fewer tokens and fewer summaries
    # than 0.35, the same pairs and no loss.
    summary_tail_ratio: float = Field(
        0.2, ge=0.05, le=0.6,
        description="comal: share of the history capacity a summary leaves verbatim at the end.",
    )  # fmt: skip
    summary_max_tokens: int = Field(
        2_000, ge=200, le=20_000, description="The most tokens a summary's body aims for."
    )
    summary_references: int = Field(
        8, ge=0, le=50,
        description="comal: exact EvidenceRead calls to the newest outputs a summary covers.",
    )  # fmt: skip
    summary_max_ratio: float = Field(
        0.1, gt=0, le=0.3, description="...and at most this share of the history capacity."
    )
    # -- layer 9: restored context -------------------------------------------------------------
    instructions: str = Field(
        "",
        description=(
            "The workspace's instructions file (AGENTS.md, CLAUDE.md) as text, re-injected "
            "after a summary. The engine reads no files: the caller passes the content."
        ),
    )
    instructions_source: str = Field(
        "AGENTS.md", min_length=1, description="The file the instructions came from, named."
    )
    instructions_max_chars: int = Field(
        8_000, ge=0, le=100_000, description="The most instruction characters re-injected."
    )
    restore_recent_files: int = Field(
        5, ge=0, le=20, description="Recently accessed files listed after a summary."
    )
    # -- layer 10: the final fit ---------------------------------------------------------------
    fit_target_ratio: float = Field(
        0.7, gt=0.1, lt=1,
        description="comal: an emergency cut (over the window, no summary yet) goes down to this.",
    )  # fmt: skip
    preview_chars: int = Field(
        120, ge=0, le=2_000, description="How much of a call's object a placeholder names."
    )
    # -- tool families (matched case-insensitively) --------------------------------------------
    read_tools: ToolNames = frozenset(
        {"read", "read_file", "view", "open_file", "open", "cat", "file_read", "notebookread"}
    )
    search_tools: ToolNames = frozenset(
        {"grep", "glob", "ls", "find", "find_file", "search_file", "search_dir", "list_dir",
         "list_files", "search", "rg"}
    )  # fmt: skip
    fetch_tools: ToolNames = frozenset({"web_fetch", "webfetch", "fetch", "fetch_url"})
    ephemeral_tools: ToolNames = frozenset(
        {"web_search", "websearch", "web_fetch", "webfetch", "fetch", "fetch_url", "browser",
         "browser_snapshot", "screenshot"}
    )  # fmt: skip
    command_tools: ToolNames = frozenset(
        {"bash", "shell", "exec", "exec_command", "execute_bash", "run_command",
         "run_terminal_cmd", "bashoutput"}
    )  # fmt: skip
    # Recall results are what the model asked for on purpose: never masked or cleared.
    recall_tools: ToolNames = frozenset(
        {"evidenceread", "session_search", "memory_search", "memory_get", "memory", "recall",
         "ctx_search", "ctx_inspect", "ctx_expand"}
    )  # fmt: skip
    editor_tools: ToolNames = frozenset({"str_replace_editor", "str_replace_based_edit_tool"})
    write_tools: ToolNames = frozenset(
        {"write", "write_file", "create_file", "create", "edit", "multiedit", "edit_file",
         "str_replace", "apply_patch", "notebookedit", "insert"}
    )  # fmt: skip
    image_tools: ToolNames = frozenset({"image_analyze", "screenshot", "browser_snapshot"})
    counter: Annotated[TokenCounter | None, SkipJsonSchema()] = Field(
        default=None,
        exclude=True,
        description="Counts what the engine renders; None: default_counter().",
    )

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.observation_deactivation_chars >= self.observation_trigger_chars:
            raise ValueError(
                "observationDeactivationChars must be below observationTriggerChars (the gap "
                f"keeps masking from flapping), got {self.observation_deactivation_chars} >= "
                f"{self.observation_trigger_chars}"
            )
        if self.fit_target_ratio >= self.compaction_trigger_ratio + 0.1:
            raise ValueError("fit_target_ratio must stay below compactionTriggerRatio + 0.1")
        return self

    @property
    def token_counter(self) -> TokenCounter:
        return self.counter if self.counter is not None else default_counter()

    def summarizer_plan(self) -> SummarizerPlan | None:
        """The summarizer these settings name: ``compaction_model``, or none (the engine's
        extractive default)."""
        return SummarizerPlan((self.compaction_model,)) if self.compaction_model else None

    @property
    def turns_kept(self) -> int:
        """``historyTurns``, or the override for this agent's channel."""
        if self.channel is not None and self.channel in self.history_turn_overrides:
            return self.history_turn_overrides[self.channel]
        return self.history_turns
