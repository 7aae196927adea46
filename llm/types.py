"""The provider-neutral shapes the run engine speaks to every model provider in.

The transcript of a run is a list of `Message`s, stored as JSON on the run so a run can resume in any worker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Role = Literal["user", "assistant", "tool", "notice"]


@dataclass(frozen=True)
class ToolCallRequest:
    """A tool call as the model asked for it. `arguments` is the raw JSON text (it may be invalid)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Message:
    """One transcript entry.

    - user: the end user's words.
    - assistant: the model's text and/or tool calls.
    - tool: the result shown to the model for `tool_call_id` (JSON text), `name` is the tool's name.
    - notice: K-Agent speaking to the model (push-backs, budget notices), never shown to the end user.
    """

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCallRequest, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The stored form: empty fields left out."""
        data: dict[str, Any] = {"role": self.role}
        if self.content:
            data["content"] = self.content
        if self.tool_calls:
            data["tool_calls"] = [
                {"id": call.id, "name": call.name, "arguments": call.arguments} for call in self.tool_calls
            ]
        if self.tool_call_id:
            data["tool_call_id"] = self.tool_call_id
        if self.name:
            data["name"] = self.name
        return data

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Message:
        return Message(
            role=data["role"],
            content=data.get("content", ""),
            tool_calls=tuple(ToolCallRequest(**call) for call in data.get("tool_calls", [])),
            tool_call_id=data.get("tool_call_id"),
            name=data.get("name"),
        )


@dataclass(frozen=True)
class ToolDefinition:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


class TextSink(Protocol):
    """What a provider tells as it reads a streamed answer. The text, in order, as it arrives (never tool calls: those
    are assembled and come with the response); `restart()` when an attempt failed and another begins: the text
    given so far is void, the next attempt's comes from its start."""

    def text(self, delta: str) -> None: ...

    def restart(self) -> None: ...


@dataclass(frozen=True)
class ModelRequest:
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolDefinition, ...]
    # "none": tools disabled for this answer (the final answer after the last round).
    tool_choice: Literal["auto", "none"]
    # The agent's `config.model`: provider, name, base_url, api_key_secret, temperature, max_output_tokens.
    model: dict[str, Any]
    project_id: str
    run_id: str = ""
    # Where the answer's text goes as the model writes it (a streamed answer): None, nobody listens.
    sink: TextSink | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class ModelResponse:
    text: str
    tool_calls: tuple[ToolCallRequest, ...] = ()
    usage: Usage = field(default_factory=Usage)
    model_name: str = ""


class ModelError(Exception):
    """The model could not answer. `retryable` errors are retried with backoff by `complete`.

    The message is shown to the tenant (a failed run's `last_error.message`, readable with a publishable key): it
    never carries an address, what a name resolved to, or anything of the operator's endpoint but its status.
    `detail` is the full reason, for the server log only.
    """

    def __init__(self, message: str, *, retryable: bool, status: int | None = None, detail: str = "") -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.detail = detail or message
