// A session resumed by id: the second query continues the first one's conversation.
import { query } from "@anthropic-ai/claude-agent-sdk";
import { options, run } from "./harness.mjs";

await run(async (assert) => {
  let first;
  for await (const message of query({ prompt: "Remember the number 42.", options: options() })) {
    if (message.type === "result") first = message;
  }
  assert.equal(first.subtype, "success");
  let second;
  for await (const message of query({ prompt: "What was the number?", options: options({ resume: first.session_id }) })) {
    if (message.type === "result") second = message;
  }
  assert.equal(second.subtype, "success");
  assert.equal(second.result, "It was 42.");
  return { first: first.session_id, second: second.session_id };
});
