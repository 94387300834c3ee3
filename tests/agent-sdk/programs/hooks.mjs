// A hook callback that blocks a Bash command before it runs.
import { query } from "@anthropic-ai/claude-agent-sdk";
import { options, run } from "./harness.mjs";

await run(async (assert) => {
  const seen = [];
  const guard = async (input, toolUseID) => {
    seen.push({ event: input.hook_event_name, command: input.tool_input.command, toolUseID });
    return {
      hookSpecificOutput: {
        hookEventName: "PreToolUse",
        permissionDecision: "deny",
        permissionDecisionReason: "no files are touched here",
      },
    };
  };
  const hooks = { PreToolUse: [{ matcher: "Bash", hooks: [guard] }] };
  let blocked, result;
  for await (const message of query({ prompt: "touch a file", options: options({ hooks, allowedTools: ["Bash"] }) })) {
    if (message.type === "result") result = message;
    if (message.type === "user" && Array.isArray(message.message.content)) {
      blocked ??= message.message.content.find((block) => block.type === "tool_result");
    }
  }
  assert.deepEqual(seen, [{ event: "PreToolUse", command: "touch blocked.txt", toolUseID: "toolu_bash" }]);
  assert.equal(blocked.is_error, true);
  assert.match(JSON.stringify(blocked.content), /no files are touched here/);
  assert.equal(result.subtype, "success");
  return { seen };
});
