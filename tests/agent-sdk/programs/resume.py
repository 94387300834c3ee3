"""A session resumed by id: the second query continues the first one's conversation."""

from claude_agent_sdk import ResultMessage, query

from harness import options, run


async def main():
    first = second = None
    async for message in query(prompt="Remember the number 42.", options=options()):
        if isinstance(message, ResultMessage):
            first = message
    assert first.subtype == "success", first
    async for message in query(prompt="What was the number?", options=options(resume=first.session_id)):
        if isinstance(message, ResultMessage):
            second = message
    assert second.subtype == "success", second
    assert second.result == "It was 42.", second.result
    return {"first": first.session_id, "second": second.session_id}


run(main)
