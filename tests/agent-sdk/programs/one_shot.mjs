// A one-shot query: the prompt, the model's answer as the result.
import { query } from "@anthropic-ai/claude-agent-sdk";
import { options, run } from "./harness.mjs";

await run(async (assert) => {
  const kinds = [];
  let init, result;
  for await (const message of query({ prompt: "Say hello", options: options() })) {
    kinds.push(message.subtype ? `${message.type}/${message.subtype}` : message.type);
    if (message.type === "system" && message.subtype === "init") init = message;
    if (message.type === "result") result = message;
  }
  assert.equal(kinds[0], "system/init");
  assert.ok(kinds.includes("assistant"), kinds.join(" "));
  assert.equal(kinds.at(-1), "result/success");
  assert.equal(result.result, "Hello from the model.");
  assert.equal(result.is_error, false);
  assert.equal(result.num_turns, 1);
  assert.equal(result.session_id, init.session_id);
  assert.ok(init.tools.includes("Read"), init.tools.join(","));
  return { session_id: result.session_id };
});
