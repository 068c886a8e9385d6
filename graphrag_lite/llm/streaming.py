"""Whether a chat call is streamed. A stream's use here is its time-out on silence: a slow local model may take
minutes over a long answer, and only a stream tells a model still writing from one that has stalled. Its
price is the stream itself, tens or hundreds of events per answer to receive and decode (for a 2,000-token
answer, 70 times the bytes of a plain one). So with `stream: auto` a local server's calls are streamed until
its answers show that even the longest answer a call allows comes well within the time-out, and plain
from then on; a plain call that times out streams that model's calls again for the rest of the run.
Hosted APIs answer fast and are not streamed; `stream: true` or `false` decides for every call.
"""

from __future__ import annotations

from graphrag_lite.config import ModelConfig
from graphrag_lite.llm.providers import is_local_model

ANSWERS_BEFORE_PLAIN = 3  # streamed answers that must show a model's speed before its calls go plain
SAFE_SHARE = 0.5  # a plain call's longest answer, at the slowest speed seen, within this share of the time-out
UNCAPPED_ANSWER = 4096  # tokens assumed for the longest answer of a call with no max_tokens
SHORTEST_MEASURE = 32  # answers shorter than this measure the writing speed too roughly


class StreamChoice:
    """What each model's streamed answers showed of its speed, in this run: the longest wait for a first piece
    (reading the prompt, queueing) and the slowest writing, in seconds per answer token."""

    def __init__(self) -> None:
        self._waited: dict[str, float] = {}  # model id -> the longest wait for a first piece
        self._writing: dict[str, float] = {}  # model id -> the most seconds per answer token, first piece to last
        self._measured: dict[str, int] = {}  # model id -> streamed answers that measured its speed
        self._stalled: set[str] = set()  # models whose plain calls timed out: streamed for good

    def streams(self, model_id: str, model: ModelConfig, max_tokens: int | None) -> bool:
        if model.stream != "auto":
            return bool(model.stream)
        if not is_local_model(model):
            return False
        if model_id in self._stalled or self._measured.get(model_id, 0) < ANSWERS_BEFORE_PLAIN:
            return True
        longest = int(max_tokens or model.call_args.get("max_tokens") or UNCAPPED_ANSWER)
        return self._waited[model_id] + self._writing[model_id] * longest > SAFE_SHARE * model.timeout

    def answered(self, model_id: str, seconds: float, first_piece_s: float | None, completion_tokens: int) -> None:
        """A streamed answer of `completion_tokens` took `seconds` from sending to its end, its first piece
        `first_piece_s` (None: a plain answer, which says nothing of the writing speed)."""
        if first_piece_s is None:
            return
        self._waited[model_id] = max(self._waited.get(model_id, 0.0), first_piece_s)
        if completion_tokens >= SHORTEST_MEASURE:
            rate = max(seconds - first_piece_s, 0.0) / completion_tokens
            self._writing[model_id] = max(self._writing.get(model_id, 0.0), rate)
            self._measured[model_id] = self._measured.get(model_id, 0) + 1

    def timed_out(self, model_id: str) -> None:
        """A plain call ran out of time: the model is slower than it seemed; stream its calls again."""
        self._stalled.add(model_id)
