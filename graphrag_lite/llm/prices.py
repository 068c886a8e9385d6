"""What calls cost, from LiteLLM's offline price map: online, in a provider batch (its batch prices, else half
the online price), and for a dry run's estimates."""

from __future__ import annotations

import functools
import json
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from graphrag_lite.config import GraphRagConfig
from graphrag_lite.llm.providers import load_litellm, online_reason


def model_price(litellm: Any, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """USD for these tokens from LiteLLM's offline price map; None when the model is not in it."""
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(model=model, prompt_tokens=prompt_tokens,
                                                              completion_tokens=completion_tokens)
    except Exception:  # not in the price map (local models)
        return None
    return float(prompt_cost + completion_cost)


def unit_prices(litellm: Any, model: str) -> tuple[float, float, float] | None:
    """USD per prompt, completion and cached prompt token from LiteLLM's offline price map (the base tier of
    tiered prices; a cached token at the prompt price when the map has no cache-read price); None when the
    model is not in it."""
    per_prompt = model_price(litellm, model, 1000, 0)
    per_completion = model_price(litellm, model, 0, 1000)
    if per_prompt is None or per_completion is None:
        return None
    read = (litellm.model_cost.get(model) or {}).get("cache_read_input_token_cost")
    return per_prompt / 1000, per_completion / 1000, per_prompt / 1000 if read is None else float(read)


def listed_unit_prices(model: str) -> tuple[float, float, float] | None:
    """unit_prices from LiteLLM's price map file, read without importing LiteLLM (seconds) for the models
    whose calls do not go through it: the model string, else its name without the provider."""
    prices = _price_map()
    info = prices.get(model) or prices.get(model.partition("/")[2]) or {}
    prompt, completion = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if not isinstance(prompt, int | float) or not isinstance(completion, int | float):
        return None
    read = info.get("cache_read_input_token_cost")
    return float(prompt), float(completion), float(prompt if read is None else read)


def longest_answer(model: str, max_tokens: int | None) -> int | None:
    """The longest answer a call may get, for a budget's worst case: its max_tokens, else the model's longest
    answer in LiteLLM's price map; None when neither says (the caller counts the prompt's length instead)."""
    return max_tokens if max_tokens is not None else listed_max_output_tokens(model)


def listed_max_output_tokens(model: str) -> int | None:
    """The longest answer the model writes, from LiteLLM's price map (read without importing LiteLLM): the
    model string, else its name without the provider; None when the map does not say."""
    prices = _price_map()
    info = prices.get(model) or prices.get(model.partition("/")[2]) or {}
    longest = info.get("max_output_tokens") or info.get("max_tokens")
    return int(longest) if isinstance(longest, int | float) and longest > 0 else None


@functools.cache
def _price_map() -> dict[str, Any]:
    spec = find_spec("litellm")  # located, not imported
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(next(iter(spec.submodule_search_locations))) / "model_prices_and_context_window_backup.json"
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # another LiteLLM layout: no prices, as for a model the map does not list
        return {}
    return found if isinstance(found, dict) else {}


def priced(prices: tuple[float, float, float] | None, prompt_tokens: int, completion_tokens: int,
           cached: int = 0) -> float | None:
    """USD for these tokens at `prices` (unit_prices, or batch prices); None without prices."""
    if prices is None:
        return None
    return (prompt_tokens - cached) * prices[0] + completion_tokens * prices[1] + cached * prices[2]


def batch_unit_prices(litellm: Any, model: str) -> tuple[float, float, float] | None:
    """USD per prompt, completion and cached prompt token in a batch: LiteLLM's batch prices where its price
    map has them, else half the online prices; None when the model is not in the price map."""
    online = unit_prices(litellm, model)
    if online is None:
        return None
    info: dict[str, Any] = dict(litellm.model_cost.get(model) or {})
    if not info:
        try:
            info = dict(litellm.get_model_info(model=model))
        except Exception:  # priced by cost_per_token, unknown to get_model_info: half the online prices
            info = {}

    def rate(key: str, online_rate: float) -> float:
        return float(info[key]) if info.get(key) is not None else online_rate / 2

    return (rate("input_cost_per_token_batches", online[0]), rate("output_cost_per_token_batches", online[1]),
            rate("cache_read_input_token_cost_batches", online[2]))


def batch_price(litellm: Any, model: str, prompt_tokens: int, completion_tokens: int, cached: int = 0
                ) -> float | None:
    """USD for these tokens in a batch; None when the model is not in LiteLLM's price map."""
    return priced(batch_unit_prices(litellm, model), prompt_tokens, completion_tokens, cached)


def estimated_cost(config: GraphRagConfig, model_id: str, prompt_tokens: int, completion_tokens: int
                   ) -> float | None:
    """What calls of this many tokens cost in batch mode (for `--dry-run --batch`): the batch price, or the
    online price for a model whose calls go online."""
    litellm = load_litellm(config.models.values())  # also registers plug-in providers (and their prices)
    model = config.models[model_id]
    if online_in_batch_mode(config, model_id) is not None:
        return model_price(litellm, model.model, prompt_tokens, completion_tokens)
    return batch_price(litellm, model.model, prompt_tokens, completion_tokens)


def online_in_batch_mode(config: GraphRagConfig, model_id: str) -> str | None:
    """Why a model's calls go online at the online price in batch mode (embeddings, a local server, a
    provider without a batch API); None when they go by batch."""
    litellm = load_litellm(config.models.values())
    model = config.models[model_id]
    if embeds(litellm, model.model):
        return "embeddings are not sent in batches"
    return online_reason(litellm, model)


def embeds(litellm: Any, model: str) -> bool:
    """Whether LiteLLM's model map says the model makes embeddings."""
    try:
        return litellm.get_model_info(model=model).get("mode") == "embedding"
    except Exception:  # a model the map does not know: priced as chat
        return False
