"""Checks Responses API streams against the `openai` Python SDK (pinned in requirements.txt).

Usage: python check.py STREAM.sse...

Each file is an SSE body. Every event's data is validated against the SDK's own event
models (`openai.types.responses.ResponseStreamEvent`: a field missing, misnamed or of the
wrong type fails), then the events are accumulated by the SDK's streaming helper
(`ResponseStreamState`, what `client.responses.stream()` uses). One JSON line per file is
printed: `{"accumulated": ..., "final": ...}`, the response the SDK's helper accumulated from
the events before the last one (its output items built from the deltas), and the final
response event's (status, incomplete details, usage), both as `model_dump` gives them,
which the Rust test compares with what `provider::responses::ResponsesStream` made of the
same bytes. Exits 1 naming the
file and the event on the first invalid event.
"""

import json
import sys
import warnings

from pydantic import TypeAdapter

from openai._types import omit
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import ResponseStreamEvent

ADAPTER = TypeAdapter(ResponseStreamEvent)

# The helper's snapshot holds the SDK's own parsed subclasses, which `model_dump` warns about.
warnings.filterwarnings("ignore", category=UserWarning, module="pydantic")


def events(path):
    with open(path, encoding="utf-8") as body:
        for frame in body.read().split("\n\n"):
            data = [line[len("data: "):] for line in frame.split("\n") if line.startswith("data: ")]
            if data:
                yield json.loads("\n".join(data))


def main(paths):
    for path in paths:
        state = ResponseStreamState(input_tools=omit, text_format=omit)
        final = None
        for number, raw in enumerate(events(path)):
            try:
                event = ADAPTER.validate_python(raw, strict=False)
            except Exception as error:  # the SDK's validation error, named with the event
                print(f"{path}: event {number} ({raw.get('type')}): {error}", file=sys.stderr)
                return 1
            if raw["type"] in ("response.completed", "response.incomplete", "response.failed"):
                final = event.response
                accumulated = state._ResponseStreamState__current_snapshot
                accumulated = accumulated.model_dump(mode="json") if accumulated else None
            state.handle_event(event)
        if final is None:
            print(f"{path}: no final response event", file=sys.stderr)
            return 1
        print(json.dumps({"accumulated": accumulated, "final": final.model_dump(mode="json")}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
