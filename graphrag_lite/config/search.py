"""The search sections (local, global and basic search), and the settings that make a query call no model."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from graphrag_lite.config.sections import Section, prompt_field


class LocalSearchConfig(Section):
    chat_model_id: str | None = Field("default_chat_model", description="id of a model in `models`; "
                                      "null: answer with the ranked evidence, no model")
    embedding_model_id: str | None = Field("default_embedding_model", description="model that embeds the question "
                                           "(the index's embedding model); null: link entities by keywords only")
    prompt: Path | None = prompt_field("local_search_system_prompt.txt")
    max_context_tokens: int = Field(12000, ge=500, description="tokens of context sent with the question")
    top_k_entities: int = Field(10, ge=1, description="entities linked to the question")
    top_k_relationships: int = Field(10, ge=1, description="relationships per linked entity")
    community_prop: float = Field(0.15, ge=0, le=1, description="share of the context for community reports")
    text_unit_prop: float = Field(0.5, ge=0, le=1, description="share of the context for source text units; the "
                                  "rest is for entities, relationships and claims")
    skip_repeated_descriptions: bool = Field(False, description="leave out the description of an entity, "
                                             "relationship or claim row whose every text unit is among the "
                                             "sources (the row stays), and give its tokens to more sources: for "
                                             "graphs whose descriptions are copied sentences (the fast method)")
    retrieved_text_units: int = Field(50, ge=0, description="text units found for the question directly (vector "
                                      "and keyword search), ranked with the linked entities' units; 0: sources "
                                      "come from the linked entities alone (with fusion, their own units, as in "
                                      "GraphRAG)")
    source_ranking: Literal["ppr", "fusion"] = Field(
        "ppr", description="how source text units are ranked: ppr, a personalized PageRank walk over entities and "
        "text units from the linked entities and the directly retrieved units (finds the bridge passages of "
        "multi-hop questions); fusion: the linked entities' units in link order, fused with direct retrieval")
    ppr_damping: float = Field(0.5, gt=0, lt=1, description="ppr: probability that the walk goes on at each step "
                               "rather than restarting at a seed (higher reaches farther from the question)")
    ppr_unit_weight: float = Field(0.5, ge=0, description="ppr: restart mass of the directly retrieved text units, "
                                   "relative to the linked entities' (1)")
    hops: int = Field(1, ge=1, le=5, description="retrieval rounds (`query local --hops`); from 2, the chat model "
                      "reads each round's context and names what is still missing (the bridge entity of a "
                      "multi-hop question), and the next round follows that lead: one extra call per round")
    hop_prompt: Path | None = prompt_field("local_search_hop_prompt.txt", "prompt that asks for the next hop; "
                                           "unset: the packaged default")
    hop_context_tokens: int = Field(4000, ge=500, description="tokens of context the model reads to name the next "
                                    "hop (entities, relationships, then sources)")


class GlobalSearchConfig(Section):
    chat_model_id: str | None = Field("default_chat_model", description="id of a model in `models`; "
                                      "null: answer with the ranked evidence, no model")
    map_prompt: Path | None = prompt_field("global_search_map_system_prompt.txt", "map prompt file; unset: the "
                                                                                  "packaged default")
    reduce_prompt: Path | None = prompt_field("global_search_reduce_system_prompt.txt", "reduce prompt file; unset: "
                                                                                        "the packaged default")
    max_context_tokens: int = Field(8000, ge=500, description="tokens of reports per map call")
    data_max_tokens: int = Field(12000, ge=500, description="tokens of map points sent to the reduce call")
    min_community_rank: float = Field(0, ge=0, le=10, description="reports rated below this are left out")
    map_max_length: int = Field(1000, ge=50, description="words per map answer")
    reduce_max_length: int = Field(2000, ge=50, description="words of the final answer")
    dynamic_community_selection: bool = Field(False, description="rate reports for relevance from the top level "
                                              "down and map over the relevant ones only, instead of one level")
    dynamic_model_id: str | None = Field(None, description="model that rates reports (a cheap one); unset: "
                                         "chat_model_id")
    dynamic_rate_prompt: Path | None = prompt_field("global_search_rate_prompt.txt", "rating prompt file; unset: the "
                                                                                     "packaged default")
    dynamic_threshold: int = Field(1, ge=0, le=5, description="reports rated at least this (0-5) are relevant")
    dynamic_max_level: int = Field(2, ge=0, description="deepest level the selection descends to")


class BasicSearchConfig(Section):
    chat_model_id: str | None = Field("default_chat_model", description="id of a model in `models`; "
                                      "null: answer with the ranked evidence, no model")
    embedding_model_id: str | None = Field("default_embedding_model", description="model that embeds the question; "
                                           "null: keyword search only")
    prompt: Path | None = prompt_field("basic_search_system_prompt.txt")
    k: int = Field(10, ge=1, description="text units retrieved")
    max_context_tokens: int = Field(12000, ge=500, description="tokens of context sent with the question")


# what a query without a model (the CLI's --no-model, a server request's no_model) sets, per search method:
# its chat model, and the model that embeds or rates for it
NO_MODEL_SETTINGS = {"local": ("local_search.chat_model_id", "local_search.embedding_model_id"),
                     "global": ("global_search.chat_model_id", "global_search.dynamic_model_id"),
                     "basic": ("basic_search.chat_model_id", "basic_search.embedding_model_id")}


def no_model_overrides(method: str) -> list[str]:
    return [f"{key}=null" for key in NO_MODEL_SETTINGS[method]]
