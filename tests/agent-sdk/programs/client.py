"""A conversation through ClaudeSDKClient: two queries in one session, the second answered
with the first in the history."""

from claude_agent_sdk import ClaudeSDKClient, ResultMessage

from harness import options, run


async def main():
    results = []
    async with ClaudeSDKClient(options=options()) as client:
        for prompt in ["My name is Ada.", "What is my name?"]:
            await client.query(prompt)
            async for message in client.receive_response():
                if isinstance(message, ResultMessage):
                    results.append(message)
    assert [r.result for r in results] == ["Nice to meet you, Ada.", "Your name is Ada."], results
    assert results[0].session_id == results[1].session_id
    return {"turns": len(results)}


run(main)
