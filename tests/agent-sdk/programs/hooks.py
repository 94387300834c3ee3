"""A hook callback that blocks a Bash command before it runs."""

from claude_agent_sdk import HookMatcher, ResultMessage, ToolResultBlock, UserMessage, query

from harness import options, run


async def main():
    seen = []

    async def guard(hook_input, tool_use_id, context):
        seen.append([hook_input["hook_event_name"], hook_input["tool_input"]["command"], tool_use_id])
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "no files are touched here",
            }
        }

    hooks = {"PreToolUse": [HookMatcher(matcher="Bash", hooks=[guard])]}
    blocked, result = None, None
    async for message in query(prompt="touch a file", options=options(hooks=hooks, allowed_tools=["Bash"])):
        if isinstance(message, ResultMessage):
            result = message
        if isinstance(message, UserMessage) and isinstance(message.content, list) and blocked is None:
            blocked = next((b for b in message.content if isinstance(b, ToolResultBlock)), None)
    assert seen == [["PreToolUse", "touch blocked.txt", "toolu_bash"]], seen
    assert blocked.is_error, blocked
    assert "no files are touched here" in str(blocked.content)
    assert result.subtype == "success"
    return {"seen": seen}


run(main)
