// An in-process SDK MCP server whose tool the model calls.
import { createSdkMcpServer, query, tool } from "@anthropic-ai/claude-agent-sdk";
import { z } from "zod";
import { options, run } from "./harness.mjs";

await run(async (assert) => {
  const calls = [];
  const calc = createSdkMcpServer({
    name: "calc",
    version: "1.0.0",
    tools: [
      tool("add", "Adds two numbers", { a: z.number(), b: z.number() }, async ({ a, b }) => {
        calls.push([a, b]);
        return { content: [{ type: "text", text: String(a + b) }] };
      }),
    ],
  });
  let init, answer, result;
  const prompt = "add 2 and 3";
  for await (const message of query({ prompt, options: options({ mcpServers: { calc }, allowedTools: ["mcp__calc__add"] }) })) {
    if (message.type === "system" && message.subtype === "init") init = message;
    if (message.type === "result") result = message;
    if (message.type === "user" && Array.isArray(message.message.content)) {
      answer ??= message.message.content.find((block) => block.type === "tool_result");
    }
  }
  assert.deepEqual(init.mcp_servers, [{ name: "calc", status: "connected" }]);
  assert.ok(init.tools.includes("mcp__calc__add"), init.tools.join(","));
  assert.deepEqual(calls, [[2, 3]]);
  assert.equal(answer.tool_use_id, "toolu_add");
  assert.match(JSON.stringify(answer.content), /"5"|\b5\b/);
  assert.equal(result.result, "2 + 3 = 5.");
  return { calls };
});
