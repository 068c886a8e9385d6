"""What model calls a stage will make, estimated before making them (`graphrag-lite index --dry-run`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphrag_lite.config import GraphRagConfig

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
        from graphrag_lite.llm.gateway import load_litellm, model_price

        if config.batch.enabled:
            from graphrag_lite.llm.batch import estimated_cost

            return estimated_cost(config, self.model_id, self.prompt_tokens + self.extra_prompt_tokens,
                                  self.completion_tokens)
        litellm = load_litellm(config.models.values())  # also registers the fake provider's prices
        return model_price(litellm, config.models[self.model_id].model,
                           self.prompt_tokens + self.extra_prompt_tokens, self.completion_tokens)

    def as_dict(self, config: GraphRagConfig) -> dict[str, Any]:
        return {"model_id": self.model_id, "calls": self.calls, "up_to_extra_calls": self.extra_calls,
                "prompt_tokens": self.prompt_tokens, "estimated_extra_prompt_tokens": self.extra_prompt_tokens,
                "estimated_completion_tokens": self.completion_tokens, "estimated_cost_usd": self.cost(config),
                "note": self.note}


def gleaning_estimate(stage: str, model_id: str, prompts_tokens: list[int], text_tokens: list[int],
                      max_gleanings: int, continue_tokens: int, cached: int = 0, compact: bool = False
                      ) -> CallEstimate:
    """First calls are certain; each gleaning resends the conversation so far (prompt, replies, follow-ups),
    or, `compact`, the prompt and the names found so far. `cached`: further text units whose answers the
    cache holds (not counted: they cost nothing)."""
    replies = [int(t * REPLY_TO_INPUT_RATIO) for t in text_tokens]
    extra_calls = len(prompts_tokens) * (max_gleanings + max(0, max_gleanings - 1))
    extra_prompt = 0
    for prompt, reply in zip(prompts_tokens, replies, strict=True):
        history = prompt + reply
        names = int(reply * NAMES_TO_REPLY_RATIO)
        for gleaning in range(max_gleanings):
            sent = (prompt + names if compact else history) + continue_tokens
            extra_prompt += sent
            history = sent + reply // 2
            names += int(reply // 2 * NAMES_TO_REPLY_RATIO)
            if gleaning < max_gleanings - 1:
                extra_prompt += (prompt + names if compact else history) + continue_tokens  # the yes/no check
    return CallEstimate(stage=stage, model_id=model_id, calls=len(prompts_tokens), extra_calls=extra_calls,
                        prompt_tokens=sum(prompts_tokens), completion_tokens=sum(replies),
                        extra_prompt_tokens=extra_prompt,
                        note=f"one call per text unit, then up to {max_gleanings} gleaning(s) each"
                             + (f"; {cached} more text units answered from the cache" if cached else ""))
