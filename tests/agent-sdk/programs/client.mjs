// A conversation: two user messages in one session, the second answered with the first in
// the history.
import { query } from "@anthropic-ai/claude-agent-sdk";
import { feed, options, run, user } from "./harness.mjs";

await run(async (assert) => {
  const input = feed();
  input.push(user("My name is Ada."));
  const results = [];
  for await (const message of query({ prompt: input.messages, options: options() })) {
    if (message.type !== "result") continue;
    results.push(message);
    if (results.length === 1) input.push(user("What is my name?"));
    else input.end();
  }
  assert.deepEqual(results.map((result) => result.result), ["Nice to meet you, Ada.", "Your name is Ada."]);
  assert.equal(results[0].session_id, results[1].session_id);
  return { turns: results.length };
});
