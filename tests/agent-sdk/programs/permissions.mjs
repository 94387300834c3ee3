// A permission callback: one Write denied, another allowed with its input rewritten.
import { query } from "@anthropic-ai/claude-agent-sdk";
import { options, run } from "./harness.mjs";

await run(async (assert) => {
  const asked = [];
  const canUseTool = async (tool, input, { toolUseID, suggestions }) => {
    asked.push({ tool, file: input.file_path, toolUseID, suggested: suggestions?.length ?? 0 });
    if (input.file_path.endsWith("denied.txt")) return { behavior: "deny", message: "not that file" };
    return { behavior: "allow", updatedInput: { ...input, content: "rewritten by the callback\n" } };
  };
  const results = [];
  const toolResults = {};
  for await (const message of query({ prompt: "write two files", options: options({ canUseTool }) })) {
    if (message.type === "result") results.push(message);
    if (message.type === "user" && Array.isArray(message.message.content)) {
      for (const block of message.message.content) {
        if (block.type === "tool_result") toolResults[block.tool_use_id] = block;
      }
    }
  }
  assert.deepEqual(asked.map((entry) => [entry.tool, entry.toolUseID]), [["Write", "toolu_deny"], ["Write", "toolu_rewrite"]]);
  assert.equal(toolResults.toolu_deny.is_error, true);
  assert.match(JSON.stringify(toolResults.toolu_deny.content), /not that file/);
  assert.notEqual(toolResults.toolu_rewrite.is_error, true);
  assert.equal(results.at(-1).subtype, "success");
  return { asked };
});
