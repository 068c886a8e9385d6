"""Microsoft GraphRAG settings files (2.x and 3.x) read as graphrag-lite settings.

A file is GraphRAG's when it has a key only GraphRAG uses (`completion_models`, `chunks`, `input_storage`,
a model with `model_provider`, ...). Each key with a meaning here is mapped (`completion_models.X` ->
`models.X` with model `<provider>/<model>`, `completion_model_id` -> `model_id` or `chat_model_id`,
`input_storage.base_dir` -> `input.base_dir`, ...); each key accepted but ignored gives one note with the
reason; anything else stays as it is, so an unknown key is still an error that names it. The translation
is data to data, before validation: the settings model stays the one source of truth.
"""

from __future__ import annotations

from typing import Any

from graphrag_lite.errors import ConfigError
from graphrag_lite.tables import VECTOR_TABLES

# sections whose model key is `model_id` here (GraphRAG 3.x: completion_model_id / embedding_model_id)
STAGE_SECTIONS = ("extract_graph", "summarize_descriptions", "extract_claims", "community_reports",
                  "entity_resolution")
SEARCH_SECTIONS = ("local_search", "global_search", "basic_search")
RENAMED_SECTIONS = {"chunks": "chunking", "entity_extraction": "extract_graph", "claim_extraction": "extract_claims",
                    "embeddings": "embed_text"}
IGNORED_SECTIONS = {
    "reporting": "graphrag-lite writes its run report to OUTPUT/stats.json",
    "snapshots": "`graphrag-lite export graphml` writes the graph; every table is kept in the output folder",
    "drift_search": "DRIFT search is not implemented; local search with `--hops 2` follows up in rounds",
    "update_index_output": "`graphrag-lite index` re-runs only what changed, in the same output folder",
    "workflows": "the pipeline is chosen with `pipeline:` (standard or fast) or a pipeline file",
    "embed_graph": "node2vec graph embeddings are not made", "umap": "UMAP layouts are not made",
}
IGNORED_KEYS = {
    "type": "graphrag-lite calls every provider through LiteLLM",
    "auth_type": "an API key is the only authentication; managed identity is not supported",
    "auth_method": "an API key is the only authentication; managed identity is not supported",
    "model_supports_json": "LiteLLM says whether a model takes structured output",
    "async_mode": "calls are always asynchronous", "parallelization_num_threads": "see concurrency",
    "parallelization_stagger": "rate limits pace the calls", "retry_strategy": "retries back off exponentially",
    "retry": "only its max_retries is read; retries back off exponentially, up to max_retry_wait seconds",
    "encoding_model": "tokens are "
    "counted with chunking.encoding_model", "audience": "keys are the only authentication", "organization":
    "set OPENAI_ORGANIZATION in the environment", "metrics": "every call is counted in OUTPUT/stats.json",
    "mock_responses": "the fake provider (model: fake/default) answers offline",
}
SECTION_KEYS_IGNORED = {
    ("community_reports", "text_prompt"): "reports are written from the graph, with graph_prompt",
    ("global_search", "knowledge_prompt"): "general knowledge is not mixed into answers",
    ("extract_graph_nlp", "text_analyzer"): "the fast method finds names with its own rules",
    ("extract_graph_nlp", "async_mode"): "the fast method needs no threads",
    ("chunking", "type"): "chunking is by tokens", ("chunking", "group_by_columns"): "documents are chunked alone",
    ("chunks", "group_by_columns"): "documents are chunked alone", ("cache", "type"): "the cache is a file cache",
    ("vector_store", "type"): "the vector store is LanceDB",
    ("embed_text", "vector_store_id"): "there is one vector store", ("output", "type"): "output is local files",
}


def is_graphrag_settings(data: dict[str, Any]) -> bool:
    models = data.get("models")
    graphrag_model = isinstance(models, dict) and any(
        isinstance(m, dict) and ("model_provider" in m or "type" in m) for m in models.values())
    return graphrag_model or bool({"completion_models", "embedding_models", "chunks", "input_storage",
                                   "output_storage", "entity_extraction", "claim_extraction"} & set(data))


def translate(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """graphrag-lite settings data for GraphRAG settings data, and one note per key accepted but ignored."""
    data, notes = dict(data), []
    for old, new in RENAMED_SECTIONS.items():
        if old in data and new not in data:
            data[new] = data.pop(old)
    for name, reason in IGNORED_SECTIONS.items():
        if name in data:
            data.pop(name)
            notes.append(f"{name}: ignored ({reason})")
    chat, embedding = _models(data, notes)
    _storage(data, notes)
    _sections(data, notes, chat, embedding)
    return data, notes


def _models(data: dict[str, Any], notes: list[str]) -> tuple[str | None, str | None]:
    """models.X from completion_models / embedding_models (3.x) or GraphRAG-style models (2.x); returns the
    ids of the chat and the embedding model that sections use when they name none."""
    completion = data.pop("completion_models", None) or {}
    embedding = data.pop("embedding_models", None) or {}
    origin: dict[str, str] = {}  # 2.x models keep their own section's name in the notes
    for model_id, model in list((data.get("models") or {}).items()):
        origin[model_id] = "models"
        kind = str((model or {}).get("type", ""))
        if "embedding" in kind:
            embedding[model_id] = data["models"].pop(model_id)
        elif kind or "model_provider" in (model or {}):
            completion[model_id] = data["models"].pop(model_id)
    models = data.setdefault("models", {})
    for section, found in (("completion_models", completion), ("embedding_models", embedding)):
        for model_id, model in found.items():
            models[model_id] = _model(f"{origin.get(model_id, section)}.{model_id}", model or {}, notes)
    return next(iter(completion), None), next(iter(embedding), None)


def _model(where: str, model: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    model = dict(model)
    provider = model.pop("model_provider", None) or ("azure" if "azure" in str(model.get("type", "")) else None)
    name = model.pop("azure_deployment_name", None) or model.pop("deployment_name", None) or model.get("model")
    if provider and name and "/" not in str(name):
        model["model"] = f"{provider}/{name}"
    if "concurrent_requests" in model:
        model["concurrency"] = model.pop("concurrent_requests")
    limit = model.pop("rate_limit", None) or {}
    if limit.get("period_in_seconds", 60) == 60:
        model.update({k: v for k, v in (("requests_per_minute", limit.get("requests_per_period")),
                                        ("tokens_per_minute", limit.get("tokens_per_period"))) if v})
    retry = model.get("retry") or {}
    if isinstance(retry, dict) and retry.get("max_retries") is not None:
        model["max_retries"] = retry["max_retries"]
    for key in ("requests_per_minute", "tokens_per_minute"):
        if model.get(key) is None:
            model.pop(key, None)  # GraphRAG writes null for "no limit"; here that is the default
    for key in [k for k in model if k in IGNORED_KEYS]:
        model.pop(key)
        notes.append(f"{where}.{key}: ignored ({IGNORED_KEYS[key]})")
    return model


def _storage(data: dict[str, Any], notes: list[str]) -> None:
    """input_storage / output_storage / cache.storage (3.x) and input.storage / input.type (2.x) as folders."""
    data["input"] = dict(data.get("input") or {})
    for old, new in (("input_storage", "input"), ("output_storage", "output")):
        _folder(data.pop(old, None) or {}, old, data.setdefault(new, {}))
    inner = data["input"].pop("storage", None)
    if inner:
        _folder(inner, "input.storage", data["input"])
    if isinstance(data.get("cache"), dict) and isinstance(data["cache"].get("storage"), dict):
        _folder(data["cache"].pop("storage"), "cache.storage", data["cache"])
    if "file_type" in data["input"]:  # 2.x: input.type is the storage, input.file_type the format
        _folder({"type": data["input"].pop("type", "file")}, "input", {})
        kind = data["input"].pop("file_type")
    else:  # 3.x: input.type is the format
        kind = data["input"].pop("type", None)
    if kind and "file_pattern" not in data["input"]:
        data["input"]["file_pattern"] = {"text": r".*\.txt$", "csv": r".*\.csv$", "json": r".*\.json$",
                                         "jsonl": r".*\.jsonl$"}.get(str(kind), r".*\.txt$")
    if "file_encoding" in data["input"]:
        data["input"]["encoding"] = data["input"].pop("file_encoding")
    for section in ("input", "output"):
        _unless_empty(data, section)


def _folder(storage: dict[str, Any], where: str, target: dict[str, Any]) -> None:
    kind = str(storage.get("type", "file"))
    if kind != "file":
        raise ConfigError(f"{where}.type: {kind} storage is not supported; graphrag-lite reads and writes local "
                          "folders (copy the data locally, or set `file`)")
    if storage.get("base_dir"):
        target["base_dir"] = storage["base_dir"]


def _unless_empty(data: dict[str, Any], section: str) -> None:
    if section in data and not data[section]:
        data.pop(section)


def _embedded_names(data: dict[str, Any], notes: list[str]) -> None:
    """embed_text.names: the tables made here get vectors as listed (the same names; GraphRAG 1.x wrote them
    with a dot, entity.description); the others are noted, with what that means."""

    section = data.get("embed_text")
    if not isinstance(section, dict) or not isinstance(section.get("names"), list):
        return
    names = [str(name).replace(".", "_") for name in section["names"]]
    other = [str(name) for name, ours in zip(section["names"], names, strict=True) if ours not in VECTOR_TABLES]
    section["names"] = [name for name in names if name in VECTOR_TABLES]
    if other:
        notes.append(f"embed_text.names: {', '.join(other)} ignored (the tables here are {', '.join(VECTOR_TABLES)}; "
                     f"vectors go to {', '.join(section['names']) or 'none of them'})")


def _sections(data: dict[str, Any], notes: list[str], chat: str | None, embedding: str | None) -> None:
    """Model references renamed, every section given the file's models where it names none, and the keys
    ignored here noted once."""
    for (section, key), reason in SECTION_KEYS_IGNORED.items():
        if isinstance(data.get(section), dict) and key in data[section]:
            data[section].pop(key)
            notes.append(f"{section}.{key}: ignored ({reason})")
    _embedded_names(data, notes)
    reports = data.get("community_reports")
    if isinstance(reports, dict) and "graph_prompt" in reports:
        if "prompt" in reports:  # set here (prompt-tune writes it): it is the one used
            reports.pop("graph_prompt")
            notes.append("community_reports.graph_prompt: ignored (community_reports.prompt is set)")
        else:
            reports["prompt"] = reports.pop("graph_prompt")
    if isinstance(data.get("vector_store"), dict) and all(isinstance(v, dict)
                                                         for v in data["vector_store"].values()):
        stores = data.pop("vector_store")  # 2.x: vector stores by id; the first is used
        first = next(iter(stores), None)
        if first is not None and stores[first].get("db_uri"):
            data["vector_store"] = {"db_uri": stores[first]["db_uri"]}
            notes.append(f"vector_store.{first}: read as the one LanceDB store, at its db_uri (its other keys, and "
                         "any other store, are ignored)")
    for section in (*STAGE_SECTIONS, "embed_text", *SEARCH_SECTIONS):
        values = data.setdefault(section, {}) if isinstance(data.get(section, {}), dict) else {}
        own = "chat_model_id" if section in SEARCH_SECTIONS else "model_id"
        if "completion_model_id" in values:
            values[own] = values.pop("completion_model_id")
        if section == "embed_text" and "embedding_model_id" in values:
            values["model_id"] = values.pop("embedding_model_id")
        if section == "embed_text":
            values.setdefault("model_id", embedding)
        else:
            values.setdefault(own, chat)
        if section in ("local_search", "basic_search"):
            values.setdefault("embedding_model_id", embedding)
        data[section] = {k: v for k, v in values.items() if v is not None}
        _unless_empty(data, section)
