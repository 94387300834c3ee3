// What every program shares: the agent to spawn (AGENT_BIN: our binary, or Claude Code's
// for the comparison run), the folder it works in (WORK), its stderr kept for a failure's
// report, and one line on success for the test to read.
import assert from "node:assert/strict";

export const stderr = [];

/** The options every query starts from, with `extra` on top. */
export function options(extra = {}) {
  return {
    pathToClaudeCodeExecutable: process.env.AGENT_BIN,
    cwd: process.env.WORK,
    stderr: (text) => stderr.push(text),
    ...extra,
  };
}

/** A user message as streaming input gives it. */
export function user(text) {
  return { type: "user", message: { role: "user", content: text }, parent_tool_use_id: null, session_id: "" };
}

/** Streaming input the program feeds as it goes: `push(message)`, `end()`. */
export function feed() {
  const waiting = [];
  let wake = null;
  let ended = false;
  async function* messages() {
    while (true) {
      while (waiting.length > 0) yield waiting.shift();
      if (ended) return;
      await new Promise((resolve) => (wake = resolve));
    }
  }
  const poke = () => { if (wake) { const w = wake; wake = null; w(); } };
  return {
    messages: messages(),
    push(message) { waiting.push(message); poke(); },
    end() { ended = true; poke(); },
  };
}

/** Runs `main`; prints `OK <summary JSON>` when it returns, the failure and the agent's
 * stderr when it throws (exit 1). */
export async function run(main) {
  try {
    const summary = await main(assert);
    console.log("OK " + JSON.stringify(summary ?? {}));
  } catch (error) {
    console.error(error?.stack ?? String(error));
    console.error("--- the agent's stderr ---\n" + stderr.join(""));
    process.exit(1);
  }
}
