"""Feeds keel's stream-json (stdin) through the Claude Agent SDK's own message parser.

Issue 23 item 13: a consumer written for Claude Code must read keel's stream. Every stdout
line keel printed goes through `claude_agent_sdk._internal.message_parser.parse_message`,
unchanged; a line the parser refuses is a failure (exit 1, naming the line). What the parser
made of the stream is printed as one JSON summary on stdout for the Rust test to check:
message classes in order, assistant texts, tool_use blocks, tool_result blocks, the system
init data and the result fields, and the `StreamEvent`s of `--include-partial-messages` (issue
26 item 1: their event types, text pieces and where they hang).
"""

import json
import sys

from claude_agent_sdk._internal.message_parser import parse_message
from claude_agent_sdk.types import (
    AssistantMessage,
    ResultMessage,
    StreamEvent,
    SystemMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)


def main() -> int:
    summary = {
        "classes": [],
        "texts": [],
        "tool_uses": [],
        "tool_results": [],
        "init": None,
        "results": [],
        "stream_events": [],
    }
    for number, raw in enumerate(sys.stdin, start=1):
        raw = raw.strip()
        if not raw:
            continue
        try:
            data = json.loads(raw)
            message = parse_message(data)
        except Exception as e:  # the parser's refusal is the finding
            print(f"line {number}: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
        if message is None:
            continue  # a type the SDK skips (keel's `event` lines)
        summary["classes"].append(type(message).__name__)
        if isinstance(message, AssistantMessage):
            for block in message.content:
                if isinstance(block, TextBlock):
                    summary["texts"].append(block.text)
                elif isinstance(block, ToolUseBlock):
                    summary["tool_uses"].append(
                        {
                            "id": block.id,
                            "name": block.name,
                            "input": block.input,
                            "parent_tool_use_id": message.parent_tool_use_id,
                            "model": message.model,
                        }
                    )
        elif isinstance(message, UserMessage) and isinstance(message.content, list):
            for block in message.content:
                if isinstance(block, ToolResultBlock):
                    summary["tool_results"].append(
                        {
                            "tool_use_id": block.tool_use_id,
                            "content": block.content,
                            "is_error": block.is_error,
                            "parent_tool_use_id": message.parent_tool_use_id,
                        }
                    )
        elif isinstance(message, StreamEvent):
            delta = message.event.get("delta") or {}
            summary["stream_events"].append(
                {
                    "type": message.event.get("type"),
                    "text": delta.get("text"),
                    "session_id": message.session_id,
                    "parent_tool_use_id": message.parent_tool_use_id,
                    "uuid": message.uuid,
                }
            )
        elif isinstance(message, SystemMessage) and message.subtype == "init":
            summary["init"] = message.data
        elif isinstance(message, ResultMessage):
            summary["results"].append(
                {
                    "subtype": message.subtype,
                    "is_error": message.is_error,
                    "num_turns": message.num_turns,
                    "duration_ms": message.duration_ms,
                    "duration_api_ms": message.duration_api_ms,
                    "result": message.result,
                    "stop_reason": message.stop_reason,
                    "total_cost_usd": message.total_cost_usd,
                    "usage": message.usage,
                    "session_id": message.session_id,
                }
            )
    json.dump(summary, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
