// An interrupt while the answer streams: that turn ends early, the session takes the next
// message.
import { query } from "@anthropic-ai/claude-agent-sdk";
import { feed, options, run, user } from "./harness.mjs";

await run(async (assert) => {
  const input = feed();
  input.push(user("Tell me a long story."));
  const q = query({ prompt: input.messages, options: options({ includePartialMessages: true }) });
  let interrupted = false;
  const results = [];
  for await (const message of q) {
    if (!interrupted && message.type === "stream_event" && message.event.type === "content_block_delta") {
      interrupted = true;
      await q.interrupt();
    }
    if (message.type !== "result") continue;
    results.push(message);
    if (results.length === 1) input.push(user("Just say done."));
    else input.end();
  }
  assert.ok(interrupted);
  assert.equal(results.length, 2);
  assert.equal(results[0].is_error, true);
  assert.equal(results[0].subtype, "error_during_execution");
  assert.ok(!results[0].result?.includes("the end"), "the interrupted story did not finish");
  assert.equal(results[1].subtype, "success");
  assert.equal(results[1].result, "Done.");
  return { first: results[0].subtype };
});
