"""The fake model as a plug-in provider (llm.providers.Provider), named by the entry point
`graphrag_lite.providers: fake`. Loaded whenever a model string starts with `fake/`, before LiteLLM is: it
imports the LiteLLM handler only when asked to register it."""

from __future__ import annotations

from typing import Any

from graphrag_lite.fake.options import FAKE_INPUT_PRICE, FAKE_OUTPUT_PRICE, Options


class FakeProvider:
    """Offline and keyless; JSON output only with `?structured=1`; a batch API of its own (batch.py)."""

    def register(self, litellm: Any, models: list[str]) -> None:
        from graphrag_lite.fake import provider  # LiteLLM's handler: loaded with LiteLLM, not before

        provider.register(models)

    def needs_key(self, model: str) -> bool:
        return False

    def supported_params(self, model: str) -> set[str]:
        """What the fake declares it takes (LiteLLM answers OpenAI's full list for any custom provider):
        structured JSON output only with `?structured=1`, so `extract_graph.format: auto` picks tuples for it
        unless a test asks otherwise."""
        params = {"temperature", "max_tokens", "stream"}
        return params | {"response_format"} if Options.parse(model).structured else params

    def embeddings(self) -> Any:
        """Embeddings without LiteLLM: a query's question is embedded without importing it."""
        from graphrag_lite.fake import direct

        return direct.embeddings

    def serves_without_litellm(self, model: str) -> bool:
        """Its embedding models (their calls go to `embeddings`); its chat models answer through LiteLLM."""
        return "embed" in model

    def unit_prices(self, model: str) -> tuple[float, float, float]:
        """USD per prompt, completion and cached prompt token (OpenAI's discount for cached ones)."""
        return FAKE_INPUT_PRICE, FAKE_OUTPUT_PRICE, FAKE_INPUT_PRICE / 2

    def batch_api(self) -> Any:
        from graphrag_lite.fake import batch  # the batch endpoint: loaded in batch mode only

        return batch


PROVIDER = FakeProvider()
