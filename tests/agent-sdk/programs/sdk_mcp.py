"""An in-process SDK MCP server whose tool the model calls."""

from claude_agent_sdk import (
    ResultMessage,
    SystemMessage,
    ToolResultBlock,
    UserMessage,
    create_sdk_mcp_server,
    query,
    tool,
)

from harness import options, run

CALLS = []


@tool("add", "Adds two numbers", {"a": float, "b": float})
async def add(args):
    CALLS.append([args["a"], args["b"]])
    return {"content": [{"type": "text", "text": str(int(args["a"] + args["b"]))}]}


async def main():
    calc = create_sdk_mcp_server(name="calc", version="1.0.0", tools=[add])
    init, answer, result = None, None, None
    opts = options(mcp_servers={"calc": calc}, allowed_tools=["mcp__calc__add"])
    async for message in query(prompt="add 2 and 3", options=opts):
        if isinstance(message, SystemMessage) and message.subtype == "init":
            init = message.data
        if isinstance(message, ResultMessage):
            result = message
        if isinstance(message, UserMessage) and isinstance(message.content, list) and answer is None:
            answer = next((b for b in message.content if isinstance(b, ToolResultBlock)), None)
    assert init["mcp_servers"] == [{"name": "calc", "status": "connected"}], init["mcp_servers"]
    assert "mcp__calc__add" in init["tools"], init["tools"]
    assert CALLS == [[2, 3]], CALLS
    assert answer.tool_use_id == "toolu_add"
    assert "5" in str(answer.content), answer.content
    assert result.result == "2 + 3 = 5.", result.result
    return {"calls": CALLS}


run(main)
