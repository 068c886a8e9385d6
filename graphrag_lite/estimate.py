"""What model calls a stage will make, estimated before making them (`graphrag-lite index --dry-run`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphrag_lite.config import GraphRagConfig
from graphrag_lite.llm.prices import estimated_cost, model_price, online_in_batch_mode
from graphrag_lite.llm.providers import load_litellm

# An extraction reply is about half as long as the text it reads (GraphRAG-style prompts, GPT-4-class models);
# completion tokens are an estimate, prompt tokens and first-pass calls are exact.
REPLY_TO_INPUT_RATIO = 0.5
# A compact gleaning lists the entity names found instead of the reply: names are about a tenth of a reply's
# tokens (entity records are about half of it, and a name is a fifth of its record)
NAMES_TO_REPLY_RATIO = 0.1


@dataclass
class CallEstimate:
    stage: str
    model_id: str
    calls: int  # calls certain to be made
    extra_calls: int  # at most this many more (gleaning continues only while the model finds more)
    prompt_tokens: int  # of the certain calls
    completion_tokens: int  # estimated
    extra_prompt_tokens: int  # of the extra calls, all made; an estimate (they resend estimated answers)
    note: str = ""

    def cost(self, config: GraphRagConfig) -> float | None:
        """USD from LiteLLM's price map (offline), counting the extra calls, at the batch price in batch mode;
        None when the model is not in it."""
        if config.batch.enabled:
            return estimated_cost(config, self.model_id, self.prompt_tokens + self.extra_prompt_tokens,
                                  self.completion_tokens)
        litellm = load_litellm(config.models.values())  # also registers plug-in providers' prices
        return model_price(litellm, config.models[self.model_id].model,
                           self.prompt_tokens + self.extra_prompt_tokens, self.completion_tokens)

    def as_dict(self, config: GraphRagConfig) -> dict[str, Any]:
        return {"model_id": self.model_id, "calls": self.calls, "up_to_extra_calls": self.extra_calls,
                "prompt_tokens": self.prompt_tokens, "estimated_extra_prompt_tokens": self.extra_prompt_tokens,
                "estimated_completion_tokens": self.completion_tokens, "estimated_cost_usd": self.cost(config),
                "priced_at": self.priced_at(config), "note": self.note}

    def priced_at(self, config: GraphRagConfig) -> str:
        """'online' or 'batch'; in batch mode, why calls that go online anyway do ('online: embeddings ...')."""
        if not config.batch.enabled:
            return "online"
        reason = online_in_batch_mode(config, self.model_id)
        return "batch" if reason is None else f"online: {reason}"


def gleaning_estimate(stage: str, model_id: str, prompts_tokens: list[int], text_tokens: list[int],
                      answered: list[tuple[bool, int | None]], max_gleanings: int, continue_tokens: int,
                      compact: bool = False, reply_ratio: float = REPLY_TO_INPUT_RATIO) -> CallEstimate:
    """Per text unit: its first call (certain), then up to `max_gleanings` follow-ups, each resending the
    conversation so far (prompt, answers, follow-ups) or, `compact`, the prompt and the names found so far.
    `answered`: per unit, whether the cache holds all of its calls (they cost nothing), and the tokens of its
    first answer when the cache holds that one (the follow-ups are still to make). Answers not in the cache
    are estimated (`reply_ratio` times their text), and so is every follow-up's prompt, which carries them."""
    calls = prompt_tokens = completion = extra_prompt = pending = 0
    for prompt, text, (done, first_answer) in zip(prompts_tokens, text_tokens, answered, strict=True):
        if done:
            continue
        pending += 1
        reply = int(text * reply_ratio) if first_answer is None else first_answer
        if first_answer is None:
            calls, prompt_tokens, completion = calls + 1, prompt_tokens + prompt, completion + reply
        extra_prompt += _follow_ups(prompt, reply, max_gleanings, continue_tokens, compact)
        completion += max_gleanings * (reply // 2)  # a gleaning finds about half as much again, at most
    cached = len(answered) - pending
    return CallEstimate(stage=stage, model_id=model_id, calls=calls,
                        extra_calls=pending * (max_gleanings + max(0, max_gleanings - 1)),
                        prompt_tokens=prompt_tokens, completion_tokens=completion, extra_prompt_tokens=extra_prompt,
                        note=f"one call per text unit, then up to {max_gleanings} gleaning(s) each"
                             + (f"; {cached} more text units answered from the cache" if cached else "")
                             + (f"; {pending - calls} of them need only their gleanings" if pending > calls else ""))


def _follow_ups(prompt: int, reply: int, max_gleanings: int, continue_tokens: int, compact: bool) -> int:
    """The prompt tokens of one unit's gleanings and yes/no checks, all made."""
    sent_in_all = 0
    history = prompt + reply
    names = int(reply * NAMES_TO_REPLY_RATIO)
    for gleaning in range(max_gleanings):
        sent = (prompt + names if compact else history) + continue_tokens
        sent_in_all += sent
        history = sent + reply // 2
        names += int(reply // 2 * NAMES_TO_REPLY_RATIO)
        if gleaning < max_gleanings - 1:
            sent_in_all += (prompt + names if compact else history) + continue_tokens  # the yes/no check
    return sent_in_all
