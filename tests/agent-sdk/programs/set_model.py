"""A model switch between two queries, and a permission mode switch with it."""

from claude_agent_sdk import ClaudeSDKClient, ResultMessage

from harness import options, run


async def main():
    results = []
    async with ClaudeSDKClient(options=options(model="claude-opus-4-8")) as client:
        await client.query("first")
        async for message in client.receive_response():
            if isinstance(message, ResultMessage):
                results.append(message)
        await client.set_model("claude-sonnet-4-5")
        await client.set_permission_mode("acceptEdits")
        await client.query("second")
        async for message in client.receive_response():
            if isinstance(message, ResultMessage):
                results.append(message)
    assert [r.subtype for r in results] == ["success", "success"], results
    return {"turns": len(results)}


run(main)
