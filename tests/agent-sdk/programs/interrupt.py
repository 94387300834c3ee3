"""An interrupt while the answer streams: that turn ends early, the session takes the next
query."""

from claude_agent_sdk import ClaudeSDKClient, ResultMessage, StreamEvent

from harness import options, run


async def main():
    results, interrupted = [], False
    async with ClaudeSDKClient(options=options(include_partial_messages=True)) as client:
        await client.query("Tell me a long story.")
        async for message in client.receive_response():
            if not interrupted and isinstance(message, StreamEvent) and message.event.get("type") == "content_block_delta":
                interrupted = True
                await client.interrupt()
            if isinstance(message, ResultMessage):
                results.append(message)
        await client.query("Just say done.")
        async for message in client.receive_response():
            if isinstance(message, ResultMessage):
                results.append(message)
    assert interrupted
    assert [r.subtype for r in results] == ["error_during_execution", "success"], results
    assert results[0].is_error
    assert results[1].result == "Done.", results[1].result
    return {"first": results[0].subtype}


run(main)
