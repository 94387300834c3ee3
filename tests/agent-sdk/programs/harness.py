"""What every program shares: the agent to spawn (AGENT_BIN: our binary, or Claude Code's
for the comparison run), the folder it works in (WORK), the agent's stderr kept for a
failure's report, and one line on success for the test to read."""

import json
import os
import sys
import traceback

import anyio

from claude_agent_sdk import ClaudeAgentOptions

STDERR: list[str] = []


def options(**extra) -> ClaudeAgentOptions:
    """The options every program starts from, with `extra` on top."""
    return ClaudeAgentOptions(
        cli_path=os.environ["AGENT_BIN"],
        cwd=os.environ["WORK"],
        stderr=STDERR.append,
        **extra,
    )


def user(text: str) -> dict:
    """A user message as streaming input gives it."""
    return {"type": "user", "message": {"role": "user", "content": text}, "parent_tool_use_id": None, "session_id": ""}


def run(main) -> None:
    """Runs the coroutine function `main`; prints `OK <summary JSON>` when it returns, the
    failure and the agent's stderr when it raises (exit 1)."""
    try:
        summary = anyio.run(main)
    except BaseException:  # noqa: BLE001 - the report is the point
        traceback.print_exc()
        print("--- the agent's stderr ---\n" + "".join(STDERR), file=sys.stderr)
        sys.exit(1)
    print("OK " + json.dumps(summary or {}))
