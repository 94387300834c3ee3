#!/usr/bin/env bash
# Peak RSS and CPU of `agent batch` with N tasks at once (N = jobs), against testkit serve
# answering each over 5 s (docs/benchmarks.md, "Many sessions at once"). Build first:
#   cargo build --release -p agent -p testkit && xtask/bench-batch.sh 200
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
AGENT=${AGENT:-$root/target/release/agent}
TESTKIT=${TESTKIT:-$root/target/release/testkit}
N=$1
work=$(mktemp -d)
trap 'kill $server 2>/dev/null || true; rm -rf "$work"' EXIT
repo=$work/repo; mkdir -p "$repo"; cd "$repo"
printf 'def greet():\n    return "helo"\n' > greet.py
git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm init
# N turns of one short answer each, any order.
python3 - "$N" > "$work/script.json" <<'PY'
import json,sys
n=int(sys.argv[1])
print(json.dumps([{"text": "Done.", "stream_ms": 5000} for _ in range(n)]))
PY
python3 - "$N" "$repo" > "$work/tasks.jsonl" <<'PY'
import json,sys
n,repo=int(sys.argv[1]),sys.argv[2]
for i in range(n): print(json.dumps({"id": f"t{i}", "repo": repo, "prompt": f"task {i}: say done"}))
PY
port=$((20000 + RANDOM % 20000))
"$TESTKIT" serve "$work/script.json" --port "$port" >/dev/null 2>&1 & server=$!
sleep 0.5
export HOME=$work/home XDG_DATA_HOME=$work/home/data XDG_CONFIG_HOME=$work/home/config AGENT_DISABLE_BACKGROUND_REQUESTS=1
mkdir -p "$HOME"
/usr/bin/time -f "%M KiB peak RSS, %U s user, %S s sys, %e s wall" \
  "$AGENT" --base-url "http://127.0.0.1:$port" batch "$work/tasks.jsonl" --jobs "$N" --out "$work/out" 2>&1 | tail -1
grep -c '"status":"done"' "$work/out/results.jsonl"
