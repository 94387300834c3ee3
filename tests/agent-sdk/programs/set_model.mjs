// A model switch between two turns, and a permission mode switch with it.
import { query } from "@anthropic-ai/claude-agent-sdk";
import { feed, options, run, user } from "./harness.mjs";

await run(async (assert) => {
  const input = feed();
  input.push(user("first"));
  const q = query({ prompt: input.messages, options: options({ model: "claude-opus-4-8" }) });
  const results = [];
  for await (const message of q) {
    if (message.type !== "result") continue;
    results.push(message);
    if (results.length === 1) {
      await q.setModel("claude-sonnet-4-5");
      await q.setPermissionMode("acceptEdits");
      input.push(user("second"));
    } else input.end();
  }
  assert.deepEqual(results.map((result) => result.subtype), ["success", "success"]);
  return { turns: results.length };
});
