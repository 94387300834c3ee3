"""A permission callback: one Write denied, another allowed with its input rewritten."""

from claude_agent_sdk import (
    ClaudeSDKClient,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    ToolResultBlock,
    UserMessage,
)

from harness import options, run


async def main():
    asked = []

    async def can_use_tool(tool, tool_input, context):
        asked.append([tool, tool_input["file_path"]])
        if tool_input["file_path"].endswith("denied.txt"):
            return PermissionResultDeny(message="not that file")
        return PermissionResultAllow(updated_input={**tool_input, "content": "rewritten by the callback\n"})

    results, tool_results = [], {}
    async with ClaudeSDKClient(options=options(can_use_tool=can_use_tool)) as client:
        await client.query("write two files")
        async for message in client.receive_response():
            if isinstance(message, ResultMessage):
                results.append(message)
            if isinstance(message, UserMessage) and isinstance(message.content, list):
                for block in message.content:
                    if isinstance(block, ToolResultBlock):
                        tool_results[block.tool_use_id] = block
    assert [a[0] for a in asked] == ["Write", "Write"], asked
    assert tool_results["toolu_deny"].is_error, tool_results
    assert "not that file" in str(tool_results["toolu_deny"].content)
    assert not tool_results["toolu_rewrite"].is_error, tool_results
    assert results[-1].subtype == "success"
    return {"asked": asked}


run(main)
