"""Which provider serves a model string, and what it needs: LiteLLM for the providers it knows, plug-ins
for the others (an entry point each); keys checked before any call, local servers told apart from hosted
APIs, prompt-cache markers, and batch APIs.

    litellm = load_litellm(config.models.values())
    problem = key_problem(config.models["default_chat_model"])   # None when its key looks usable
"""

from __future__ import annotations

import functools
import ipaddress
import shlex
from collections.abc import Awaitable, Callable, Iterable
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, Protocol, cast
from urllib.parse import urlparse

from graphrag_lite.config import ModelConfig
from graphrag_lite.large_imports import import_large
from graphrag_lite.llm.openai_http import speaks_openai

LOCAL_PROVIDERS = {"ollama", "ollama_chat", "lm_studio", "llamafile", "hosted_vllm", "vllm", "xinference"}

# providers whose batch and file APIs LiteLLM drives with OpenAI's JSONL of chat requests
BATCH_PROVIDERS = frozenset({"openai", "azure", "litellm_proxy", "vertex_ai", "bedrock", "mistral", "xai"})


class BatchFunctions(Protocol):
    """LiteLLM's batch and file functions, as the litellm module and a plug-in provider's batch API give them."""

    async def acreate_file(self, **kwargs: Any) -> Any: ...

    async def acreate_batch(self, **kwargs: Any) -> Any: ...

    async def aretrieve_batch(self, **kwargs: Any) -> Any: ...

    async def afile_content(self, **kwargs: Any) -> Any: ...


ENTRY_POINT_GROUP = "graphrag_lite.providers"


class Provider(Protocol):
    """A provider LiteLLM does not know, plugged in under the name its model strings start with (`name/...`)
    by an entry point of the group `graphrag_lite.providers` (the offline fake model is one).
    Calls reach it through LiteLLM's custom-handler map, which `register` fills. The gateway tells it the
    stage and step of each call (calls.CALL_STEP; in a batch, each request line's `call`)."""

    def register(self, litellm: Any, models: list[str]) -> None:
        """Make calls to these model strings reach the provider through LiteLLM (idempotent)."""

    def needs_key(self, model: str) -> bool:
        """Whether calls need an API key."""

    def supported_params(self, model: str) -> set[str]:
        """The OpenAI parameters the model takes (LiteLLM answers OpenAI's whole list for a custom provider)."""

    def batch_api(self) -> BatchFunctions | None:
        """Its file and batch functions (LiteLLM's reach only the providers LiteLLM knows); None: no batches."""

    # Optional, read with getattr: `embeddings()`, a function (model string, texts) -> llm.openai_http's
    # EmbeddingReply that embeds without LiteLLM (raising what an OpenAI-compatible server's errors raise);
    # `unit_prices(model)`, USD per prompt, completion and cached prompt token, so that such calls are priced
    # without LiteLLM's price map; `serves_without_litellm(model)`, whether every call of that model string
    # does without LiteLLM (a run then does not import it for that model).


@functools.cache
def _entry_points() -> dict[str, EntryPoint]:
    return {point.name: point for point in entry_points(group=ENTRY_POINT_GROUP)}


@functools.cache
def plug_in(name: str) -> Provider | None:
    """The plug-in provider of that name, loaded on first use; None when no plug-in has the name."""
    point = _entry_points().get(name)
    return None if point is None else cast(Provider, point.load())


def plugged(model: str) -> Provider | None:
    """The plug-in provider a model string names (`name/model`), or None for LiteLLM's own providers."""
    name, slash, _ = model.partition("/")
    return plug_in(name) if slash else None


def plugged_embeddings(model: str) -> Callable[[str, list[str]], Awaitable[Any]] | None:
    """The embedding function of the model's plug-in provider, when it embeds without LiteLLM."""
    provider = plugged(model)
    offered = getattr(provider, "embeddings", None)
    return offered() if offered is not None else None


def needs_litellm(model: ModelConfig) -> bool:
    """Whether calls to `model` may go through LiteLLM: not an OpenAI-compatible server called directly, nor a
    plug-in's model that it serves on its own (`serves_without_litellm(model)`, optional)."""
    if speaks_openai(model):
        return False
    serves = getattr(plugged(model.model), "serves_without_litellm", None)
    return not (serves is not None and serves(model.model))


def plugged_prices(model: str) -> tuple[float, float, float] | None:
    """USD per prompt, completion and cached prompt token from the model's plug-in provider, if it says."""
    offered = getattr(plugged(model), "unit_prices", None)
    return offered(model) if offered is not None else None


def supported_params(litellm: Any, model: str) -> set[str]:
    """The OpenAI parameters a model takes, as its plug-in or LiteLLM says (none when LiteLLM does not know it:
    only what was configured is sent)."""
    if (provider := plugged(model)) is not None:
        return provider.supported_params(model)
    try:
        return set(litellm.get_supported_openai_params(model=model) or [])
    except Exception:  # litellm does not know the model
        return set()


def batch_functions(litellm: Any, model: ModelConfig) -> tuple[BatchFunctions, str]:
    """The batch and file functions that reach the model's provider, and the provider's name."""
    name = model.model.partition("/")[0]
    if (provider := plugged(model.model)) is not None and (functions := provider.batch_api()) is not None:
        return functions, name
    return cast(BatchFunctions, litellm), litellm.get_llm_provider(model.model, api_base=model.api_base)[1]


def load_litellm(models: Iterable[ModelConfig]) -> Any:
    """LiteLLM, set up for these models: plug-in providers registered with it for the models that name one."""
    litellm: Any = import_large("litellm")  # on first use: it takes seconds, and model-free pipelines never need it

    litellm.suppress_debug_info = True
    litellm.drop_params = True  # a parameter a provider does not take is dropped, not an error
    by_provider: dict[str, list[str]] = {}
    for model in models:
        if plugged(model.model) is not None:
            by_provider.setdefault(model.model.split("/", 1)[0], []).append(model.model)
    for name, strings in by_provider.items():
        plug_in(name).register(litellm, strings)  # type: ignore[union-attr]
    return litellm


def connection(model: ModelConfig) -> dict[str, Any]:
    """The arguments that reach the model's server: its key, endpoint and API version (retries are ours)."""
    arguments: dict[str, Any] = {"num_retries": 0}
    if model.api_key is not None:
        arguments["api_key"] = model.api_key.get_secret_value()
    if model.api_base:
        arguments["api_base"] = model.api_base
    if model.api_version:
        arguments["api_version"] = model.api_version
    return arguments


def no_key_choices(root: Path) -> str:
    """What to do without a key, for the project in `root`."""
    where = shlex.quote(str(root))
    return (f"put the key in {root / '.env'} (GRAPHRAG_API_KEY=...) or the environment; or work without a model: "
            f"`graphrag-lite index --root {where} --method fast` builds an index with none, and "
            f"`graphrag-lite query local \"...\" --root {where} --no-model` answers with the ranked evidence")


def key_problem(model: ModelConfig) -> str | None:
    """Why the model's calls would fail for want of a key, found before any call: a placeholder such as
    `init`'s <your-api-key>, or no key at all where the provider needs one and no api_base names a server
    that may not. None when the key looks usable (or the provider needs none)."""
    plug_in = plugged(model.model)
    if plug_in is not None and not plug_in.needs_key(model.model):
        return None
    if model.api_key is not None:
        value = model.api_key.get_secret_value()
        if value.strip() and set(value.strip()) == {"*"} and not is_local_model(model):  # a local server takes any
            return (f"the API key is hidden ({value!r}, as output/settings.effective.yaml writes a key the settings "
                    "file held): write the key, or the ${VAR} that holds it, in its place")
        if model.placeholder_key() and not (model.api_base and value.strip()):
            return f"the API key is the placeholder {value!r}" if value.strip() else "the API key is empty"
        return None
    if model.api_base:
        return None
    if plug_in is not None:  # LiteLLM cannot tell what a plug-in needs: it said it needs a key
        return "no API key (its provider needs one: set api_key)"
    litellm = import_large("litellm")
    try:
        missing = litellm.validate_environment(model=model.model).get("missing_keys", [])
    except Exception:  # a provider LiteLLM cannot check offline: let the first call say
        return None
    keys = [k for k in missing if k.endswith("_API_KEY")]
    return f"no API key (LiteLLM looks for {', '.join(keys)})" if keys else None


def is_local_model(model: ModelConfig) -> bool:
    """A model served on this machine or the local network (Ollama, llama.cpp, vLLM, LM Studio, ...)."""
    if model.model.split("/", 1)[0] in LOCAL_PROVIDERS:
        return True
    host = urlparse(model.api_base or "").hostname or ""
    if host in ("localhost", "host.docker.internal") or host.endswith(".local"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_unspecified


# Anthropic caches a prompt prefix only up to a block marked cache_control. The first message of an
# extraction holds the instructions and the text, and its gleanings send it again: marked, it is read from
# the cache at a tenth of the price (and written at 1.25x once, so only calls with follow-ups are marked).
ANTHROPIC_CACHE_POINTS = [{"location": "message", "index": 0}]


@functools.lru_cache(maxsize=64)
def marks_prompt_cache(model: str) -> bool:
    """Whether the model wants an explicit cache marker (Claude on Anthropic, Bedrock, Vertex AI), by
    LiteLLM's model map; other providers cache prefixes on their own."""
    if plugged(model) is not None:  # a plug-in is not Claude
        return False
    try:
        from litellm import get_llm_provider
        from litellm.llms.anthropic.common_utils import supports_anthropic_cache_control

        name, provider, *_ = get_llm_provider(model=model)
    except Exception:  # an older LiteLLM, or a model it cannot route: no marker, no harm
        return False
    return bool(supports_anthropic_cache_control(name, provider))


def online_reason(litellm: Any, model: ModelConfig) -> str | None:
    """Why a model's calls go online even in batch mode; None when they can go by batch."""
    if (plug_in := plugged(model.model)) is not None:
        return None if plug_in.batch_api() is not None else "its provider has no batch API"
    if is_local_model(model):
        return "a local server (no batch API, and nothing to save)"
    try:
        provider = litellm.get_llm_provider(model.model, api_base=model.api_base)[1]
    except Exception:  # the online path names the problem
        return "LiteLLM does not know its provider"
    if provider not in BATCH_PROVIDERS:
        return f"LiteLLM has no batch API for provider {provider}"
    return None
