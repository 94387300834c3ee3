"""A one-shot query: the prompt, the model's answer as the result."""

from claude_agent_sdk import AssistantMessage, ResultMessage, SystemMessage, query

from harness import options, run


async def main():
    kinds, init, result = [], None, None
    async for message in query(prompt="Say hello", options=options()):
        kinds.append(type(message).__name__)
        if isinstance(message, SystemMessage) and message.subtype == "init":
            init = message.data
        if isinstance(message, ResultMessage):
            result = message
    assert kinds[0] == "SystemMessage", kinds
    assert "AssistantMessage" in kinds, kinds
    assert kinds[-1] == "ResultMessage", kinds
    assert result.subtype == "success" and not result.is_error, result
    assert result.result == "Hello from the model.", result.result
    assert result.num_turns == 1, result.num_turns
    assert result.session_id == init["session_id"]
    assert "Read" in init["tools"], init["tools"]
    return {"session_id": result.session_id}


run(main)
