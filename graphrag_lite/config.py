"""The configuration model: the single source of every default, and the loader for settings.yaml.

Section and key names follow Microsoft GraphRAG's settings.yaml where it has one, so users can carry
their configuration over. Loading substitutes ${VAR} from the environment and from a .env beside the file,
applies --set overrides, resolves relative paths against the config's folder, and turns every validation
problem into a message that names the key (and the closest valid key for a typo).
"""

from __future__ import annotations

import codecs
import difflib
import hashlib
import os
import re
import types
import typing
from pathlib import Path
from typing import Any, Literal

import yaml
from dotenv import dotenv_values
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from graphrag_lite.compat import is_graphrag_settings
from graphrag_lite.compat import translate as translate_graphrag_settings
from graphrag_lite.errors import ConfigError
from graphrag_lite.names import normalize_name
from graphrag_lite.tables import VectorTable
from graphrag_lite.tokens import DEFAULT_ENCODING, known_encodings

CONFIG_FILENAMES = ("settings.yaml", "settings.yml")


def prompt_field(file: str, description: str = "prompt file; unset: the packaged default") -> Any:
    """A prompt setting: a file path, or None for the packaged prompt `file` (which `init` copies into the
    project's prompts/ folder and names here)."""
    return Field(None, description=description, json_schema_extra={"prompt_file": file})


class Section(BaseModel):
    """Base for every config section: unknown keys are errors, values are checked on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_true_or_false_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        """YAML's true/false where a number is expected is a mistake, which pydantic would read as 1/0."""
        if isinstance(value, bool) and info.field_name in cls.model_fields:
            allowed = _plain_types(cls.model_fields[info.field_name].annotation)
            if bool not in allowed and allowed & {int, float}:
                raise ValueError(f"expected a number, not {str(value).lower()}")
        return value


def _plain_types(annotation: Any) -> set[Any]:
    """The types an annotation allows, through unions and Optional (Literal values are not types)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return {t for arg in typing.get_args(annotation) for t in _plain_types(arg)}
    return {annotation} if isinstance(annotation, type) else set()


_PLACEHOLDER_KEY = re.compile(r"^\s*(<[^>]*>|your[-_ ]?(api[-_ ]?)?key|x+|\*+|changeme|none)?\s*$", re.IGNORECASE)


class ModelConfig(Section):
    """One model, chat or embedding, addressed by any LiteLLM model string."""

    model: str = Field(description="LiteLLM model string, e.g. openai/gpt-4o-mini, azure/my-deployment, "
                       "ollama/llama3, or the offline fake provider: fake/default (chat), fake/embedding")
    api_key: SecretStr | None = Field(None, description="API key; use ${VAR} to read it from the environment "
                                      "or .env. Unset: the provider's usual environment variable")
    api_base: str | None = Field(None, description="base URL, e.g. for Azure or an OpenAI-compatible server")
    api_version: str | None = Field(None, description="API version (Azure)")
    call_args: dict[str, Any] = Field(default_factory=dict,
                                      description="extra arguments for every call: temperature, max_tokens, ...")
    concurrency: int = Field(25, ge=1, description="requests in flight at once")
    requests_per_minute: int | None = Field(None, ge=1, description="request rate limit; unset: none")
    tokens_per_minute: int | None = Field(None, ge=1, description="token rate limit; unset: none")
    max_retries: int = Field(10, ge=0, description="retries of a failed or malformed call")
    max_retry_wait: float = Field(60.0, gt=0, description="longest wait between retries, seconds")
    timeout: float = Field(180.0, gt=0, description="seconds before a call is abandoned and retried; for a "
                           "streamed call, seconds without a new piece of the answer")
    stream: Literal["auto"] | bool = Field("auto", description="stream answers and time out on silence instead of "
                                           "on total time; auto: for local servers (Ollama, llama.cpp, vLLM, "
                                           "api_base on this machine or the local network)")
    max_parse_retries: int = Field(2, ge=0, description="follow-ups asking the model to correct an answer "
                                   "that could not be parsed")

    def placeholder_key(self) -> bool:
        """Whether the key is init's placeholder (or its kin: empty, xxx, changeme, a key hidden as asterisks
        in output/settings.effective.yaml), not a key."""
        return self.api_key is not None and bool(_PLACEHOLDER_KEY.match(self.api_key.get_secret_value()))


def _default_models() -> dict[str, ModelConfig]:
    return {
        "default_chat_model": ModelConfig(model="openai/gpt-4o-mini"),
        "default_embedding_model": ModelConfig(model="openai/text-embedding-3-small"),
    }


def _a_regular_expression(value: str) -> str:
    try:
        re.compile(value)
    except re.error as err:
        raise ValueError(f"{value!r} is not a valid regular expression: {err}") from None
    return value


def _a_known_encoding(value: str | None) -> str | None:
    try:
        if value is not None:
            codecs.lookup(value.replace("-sig", "") if value.lower() != "utf-8-sig" else value)
    except LookupError:
        raise ValueError(f"{value!r} is not a known text encoding (utf-8, latin-1, cp1252, ...)") from None
    return value


class InputConfig(Section):
    class FileRule(Section):
        """One entry of input.files: settings for the files whose path matches `pattern`. A key left out
        (or null) takes the section's value, so a rule names only what differs."""

        pattern: str = Field(description="regular expression a file's path (relative to base_dir) must match")
        encoding: str | None = None
        text_column: str | None = None
        title_column: str | None = None
        id_column: str | None = None
        metadata: list[str] | None = None

        @model_validator(mode="before")
        @classmethod
        def _has_a_pattern(cls, data: Any) -> Any:
            # said here, because the generic "Field required" message would name the list's type, not the key
            if isinstance(data, dict) and "pattern" not in data:
                raise ValueError("every rule needs a `pattern` (a regular expression for the files it applies "
                                 "to), e.g. {pattern: '.*\\.csv$', text_column: body}")
            return data

        _pattern_compiles = field_validator("pattern")(_a_regular_expression)
        _encoding_known = field_validator("encoding")(_a_known_encoding)

    base_dir: Path = Field(Path("input"), description="folder of documents, read recursively")
    file_pattern: str = Field(r".*\.(txt|md|csv|json|jsonl|parquet|pdf|docx|html?)$",
                              description="regular expression a file's path (relative to base_dir) must match; "
                              "PDF, DOCX and HTML need pip install 'graphrag-lite[documents]'")
    encoding: str = Field("utf-8", description="text encoding of the files (a UTF-8 BOM is handled)")
    text_column: str = Field("text", description="column (or JSON key) holding the text, for tabular input")
    title_column: str | None = Field(None, description="column used as title; unset: file path and row")
    id_column: str | None = Field(None, description="column used as document id; unset: a hash of the text")
    metadata: list[str] | None = Field(None, description="columns kept as metadata; unset: all other columns")
    files: list[FileRule] | None = Field(None, description="per-file rules, e.g. [{pattern: '.*\\.csv$', "
                                         "text_column: body, title_column: headline}]: a file matched by "
                                         "file_pattern takes the first rule whose pattern matches its path; keys a "
                                         "rule leaves out (encoding, text_column, title_column, id_column, "
                                         "metadata) come from this section")

    _pattern_compiles = field_validator("file_pattern")(_a_regular_expression)
    _encoding_known = field_validator("encoding")(_a_known_encoding)


class ChunkingConfig(Section):
    size: int = Field(1200, ge=1, description="tokens per text unit")
    overlap: int = Field(100, ge=0, description="tokens shared by consecutive text units of a document")
    encoding_model: str = Field(DEFAULT_ENCODING, description="tiktoken encoding (o200k_base or cl100k_base) of the "
                                "text units and of every token count: budgets, prompts, estimates")
    prepend_metadata: bool = Field(False, description="start every text unit with the document's title "
                                   "and metadata (counted in its size)")
    min_tail_tokens: int = Field(0, ge=0, description="a document's last text unit that would bring fewer new "
                                 "tokens than this (beyond the overlap) is joined to the unit before it, which grows "
                                 "by that much; 0: fixed windows, as GraphRAG")

    @field_validator("encoding_model")
    @classmethod
    def _known_encoding(cls, name: str) -> str:
        if name not in known_encodings():
            raise ValueError(f"unknown tiktoken encoding '{name}'; use one of {', '.join(known_encodings())} "
                             "(o200k_base for GPT-4o and later models, cl100k_base for GPT-4 and GPT-3.5)")
        return name

    @model_validator(mode="after")
    def _overlap_below_size(self) -> ChunkingConfig:
        if self.overlap >= self.size:
            raise ValueError(f"overlap ({self.overlap}) must be smaller than size ({self.size})")
        if self.min_tail_tokens > self.size - self.overlap:  # a unit grows by less than one more window
            raise ValueError(f"min_tail_tokens ({self.min_tail_tokens}) must be at most size - overlap "
                             f"({self.size} - {self.overlap} = {self.size - self.overlap}, after the method's "
                             "pipeline settings and --set)")
        return self


class ExtractGraphConfig(Section):
    model_id: str = Field("default_chat_model", description="id of a model in `models`")
    prompt: Path | None = prompt_field("extract_graph.txt", "prompt file for GraphRAG's tuple answers (and for JSON "
                                       "answers too when json_prompt is unset: a GraphRAG project's own prompt); "
                                       "unset: the packaged default")
    json_prompt: Path | None = prompt_field("extract_graph_json.txt", "prompt file for JSON answers (format json, "
                                            "or auto with a model that takes structured output); unset: the "
                                            "packaged default, or `prompt` when that is set")
    entity_types: list[str] = Field(["organization", "person", "geo", "event"],
                                    description="entity types the model is asked to find")
    max_gleanings: int = Field(1, ge=0, description="follow-up calls asking for missed entities")
    # compact by default: it found every entity history's gleaning added, and more, on a real small model with
    # the same first answers (bench/gleaning_modes.py), for 15-30% fewer extraction prompt tokens (issue 16)
    gleaning: Literal["history", "compact"] = Field(
        "compact", description="what a follow-up sends: compact, the first prompt again and the names already "
        "found instead of the first answer (fewer prompt tokens, and the first prompt is a prefix a provider's "
        "prompt cache serves); history, the whole conversation so far (Microsoft GraphRAG)")
    format: Literal["auto", "tuples", "json"] = Field(
        "auto", description="answer format: GraphRAG's tuples (prompt), or JSON (json_prompt); auto: JSON with "
        "structured output when LiteLLM says the model supports it, else tuples (a `prompt` set without a "
        "json_prompt, as in a GraphRAG project, decides by the format it asks for)")
    max_completion_tokens: int | None = Field(8000, ge=1, description="longest answer (stops a model that "
                                              "rambles or loops); a longer one is cut off, and its complete records "
                                              "are kept and reported")
    require_grounding: bool = Field(True, description="drop entities whose name does not occur in their text unit "
                                    "(copied from the prompt's example, or invented), and their relationships")
    max_failed_share: float = Field(0.5, ge=0, le=1, description="stop the run after extraction (graph or claims) "
                                    "when more than this share of text units failed; failures below it still end "
                                    "the run with exit code 4")


class ExtractGraphNlpConfig(Section):
    window: Literal["sentence", "text_unit"] = Field("sentence", description="entities co-occur when they are "
                                                      "in the same sentence, or the same text unit")
    min_entity_frequency: int = Field(2, ge=1, description="entities mentioned in fewer text units are pruned")
    min_cooccurrence: int = Field(1, ge=1, description="pairs co-occurring in fewer windows get no edge")
    min_npmi: float = Field(0.1, ge=-1, le=1, description="edges whose normalized PMI is lower are pruned")
    remove_top_hubs: int = Field(0, ge=0, description="this many highest-degree entities are removed (a narrator "
                                 "or a ubiquitous name can tie everything together)")


class EntityResolutionConfig(Section):
    enabled: bool = Field(True, description="merge likely aliases (Holmes / Sherlock Holmes, Acme Corp / Acme "
                          "Corporation) when types match and the graph supports it; every merge is listed in "
                          "the entity_aliases table")
    max_edit_distance: int = Field(1, ge=0, le=3, description="two names of the same type that differ in one "
                                   "word merge when that word is this many edits from the other's (a plural ending "
                                   "counts as one) and they share a neighbour; 0 turns this rule off")
    generic_words: dict[str, list[str]] = Field({}, description="words per entity type that say what kind of "
                                                "thing a name is, added to the built-in lists (e.g. GEO: [Tor, "
                                                "Wold]): a name made only of them merges into nothing, and "
                                                "'<generic place word> of X' is the place X")
    overrides: Path | None = Field(None, description="CSV of name pairs to always merge or never merge, columns "
                                   "alias,title,action (merge or never); `graphrag-lite aliases --csv FILE` writes "
                                   "the merges made in this form, ready to edit. Editing it re-runs merge_graph "
                                   "and the stages after it only")

    confirm_with_model: bool = Field(False, description="ask the chat model which longer name a name the rules "
                                     "left apart denotes, if any (\"Northwind\": Northwind Logistics or Northwind "
                                     "Bank?), from their descriptions: two cached calls per name, the candidates "
                                     "in both orders; it merges only when both answers agree")
    model_id: str = Field("default_chat_model", description="id of a model in `models` (confirm_with_model)")
    prompt: Path | None = prompt_field("resolve_alias.txt", "prompt file (confirm_with_model); unset: the packaged "
                                                         "default")
    max_completion_tokens: int | None = Field(1000, ge=1, description="longest answer (confirm_with_model); a "
                                              "reasoning model needs room to think")

    @field_validator("generic_words")
    @classmethod
    def _upper_case(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        return {kind.upper(): [normalize_name(w) for w in words] for kind, words in value.items()}


class SummarizeDescriptionsConfig(Section):
    model_id: str = Field("default_chat_model", description="id of a model in `models`")
    prompt: Path | None = prompt_field("summarize_descriptions.txt")
    max_length: int = Field(500, ge=1, description="words per summary")
    max_input_tokens: int = Field(4000, ge=100, description="descriptions per call are folded to this size")
    max_completion_tokens: int | None = Field(2000, ge=1, description="longest summary; a longer one is cut off")
    join_max_tokens: int = Field(400, ge=0, description="several descriptions whose joined text has at most this "
                                 "many tokens are joined with no model call (a summary of them saves fewer tokens "
                                 "in later prompts than its call costs: bench/summary_threshold.py); longer ones "
                                 "are summarized; 0 summarizes every entity or relationship with several, as "
                                 "Microsoft GraphRAG does (except when one description already says all the "
                                 "others say: it is kept, with no call)")
    join_max_descriptions: int = Field(8, ge=1, description="more distinct descriptions than this are summarized "
                                       "even when they are short")


class ExtractClaimsConfig(Section):
    enabled: bool = Field(False, description="extract claims (covariates)")
    model_id: str = Field("default_chat_model", description="id of a model in `models`")
    prompt: Path | None = prompt_field("extract_claims.txt")
    description: str = Field("Any claims or facts that could be relevant to information discovery.",
                             description="what counts as a claim")
    max_gleanings: int = Field(1, ge=0, description="follow-up calls asking for missed claims")
    max_completion_tokens: int | None = Field(4000, ge=1, description="longest answer; a longer one is cut off")


class ClusterGraphConfig(Section):
    max_cluster_size: int = Field(10, ge=2, description="communities larger than this are split again")
    use_lcc: bool = Field(False, description="cluster only the largest connected component, as GraphRAG does "
                          "(entities outside it are in no community, so global search cannot see them); false: "
                          "every entity is in a community, those without relationships grouped by text unit")
    seed: int = Field(0xDEADBEEF, description="random seed, for reproducible communities")


class CommunityReportsConfig(Section):
    model_id: str = Field("default_chat_model", description="id of a model in `models`")
    prompt: Path | None = prompt_field("community_report.txt")
    max_length: int = Field(2000, ge=1, description="words per report")
    max_input_length: int = Field(8000, ge=500, description="tokens of context per report")
    max_completion_tokens: int | None = Field(6000, ge=1, description="longest report; a longer one is cut off")


# the LanceDB tables of an index (Microsoft GraphRAG's names), in the order embed_text writes them


class EmbedTextConfig(Section):
    model_id: str | None = Field("default_embedding_model", description="id of a model in `models`; null: no "
                                 "vectors, full-text indexes only")
    # larger than Microsoft GraphRAG's 16 texts / 8,191 tokens, which cost a call per 16 texts; OpenAI takes
    # 2,048 texts and 300k tokens a call, and a provider that refuses a batch this large gets halved ones
    batch_size: int = Field(256, ge=1, description="texts per embedding call (halved, for the rest of the run, "
                            "when the provider refuses that many)")
    batch_max_tokens: int = Field(50_000, ge=1, description="tokens per embedding call (halved like batch_size)")
    # Microsoft GraphRAG embeds report texts too (for DRIFT search, which is not here); no search here reads
    # their vectors, and they were a tenth of an index's tokens (issue 16)
    names: list[VectorTable] = Field(
        ["entity_description", "text_unit_text"], description="LanceDB tables that get vectors (local search reads "
        "entity_description and text_unit_text, basic search text_unit_text; add community_full_content for your "
        "own use); every table gets a full-text index")


class VectorStoreConfig(Section):
    db_uri: str = Field("output/lancedb", description="LanceDB folder or URI (s3://, gs://, az:// work too)")


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


class CacheConfig(Section):
    enabled: bool = Field(True, description="reuse validated model answers across runs")
    base_dir: Path = Field(Path("cache"), description="folder of the cache")


class BudgetConfig(Section):
    max_cost_usd: float | None = Field(None, gt=0, description="stop the run (keeping finished work) once "
                                       "model calls cost this much; unset: no limit")
    max_tokens: int | None = Field(None, gt=0, description="stop the run once model calls used this many "
                                   "tokens; unset: no limit")
    scope: Literal["run", "index"] = Field("run", description="run: each run has the whole budget; index: spending "
                                           "of every run of this output folder counts (output/llm_spend.json)")


class OutputConfig(Section):
    base_dir: Path = Field(Path("output"), description="folder of the index tables and stats.json")


class BatchConfig(Section):
    """Batch mode (`index --batch`, `update --batch`): the index stages' model calls go to the provider's batch
    API, at its batch price (about half), answered within 24 hours instead of seconds."""

    enabled: bool = Field(False, description="send the index stages' calls as batch jobs: set by `index --batch` "
                          "and `update --batch` only (an error in the settings file)")
    window: float = Field(0.5, gt=0, description="seconds without a new call before the calls collected for a "
                          "model are sent as one batch")
    max_requests: int = Field(50_000, ge=1, description="calls per batch at most (OpenAI's limit is 50,000)")
    poll_interval: float = Field(60.0, gt=0, description="longest wait between two polls of a batch, seconds "
                                 "(polls start at one a second and slow down to this)")


class GraphRagConfig(Section):
    """Everything graphrag-lite reads from settings.yaml."""

    pipeline: str = Field("standard", description="pipeline to run: a name in pipelines/ "
                          "(standard, fast) or the path of a pipeline file")
    models: dict[str, ModelConfig] = Field(default_factory=_default_models,
                                           description="models by id; sections refer to them by model_id")
    input: InputConfig = Field(default_factory=InputConfig)
    chunking: ChunkingConfig = Field(default_factory=ChunkingConfig)
    extract_graph: ExtractGraphConfig = Field(default_factory=ExtractGraphConfig)
    extract_graph_nlp: ExtractGraphNlpConfig = Field(default_factory=ExtractGraphNlpConfig)
    entity_resolution: EntityResolutionConfig = Field(default_factory=EntityResolutionConfig)
    summarize_descriptions: SummarizeDescriptionsConfig = Field(default_factory=SummarizeDescriptionsConfig)
    extract_claims: ExtractClaimsConfig = Field(default_factory=ExtractClaimsConfig)
    cluster_graph: ClusterGraphConfig = Field(default_factory=ClusterGraphConfig)
    community_reports: CommunityReportsConfig = Field(default_factory=CommunityReportsConfig)
    embed_text: EmbedTextConfig = Field(default_factory=EmbedTextConfig)
    vector_store: VectorStoreConfig = Field(default_factory=VectorStoreConfig)
    local_search: LocalSearchConfig = Field(default_factory=LocalSearchConfig)
    global_search: GlobalSearchConfig = Field(default_factory=GlobalSearchConfig)
    basic_search: BasicSearchConfig = Field(default_factory=BasicSearchConfig)
    cache: CacheConfig = Field(default_factory=CacheConfig)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    output: OutputConfig = Field(default_factory=OutputConfig)
    # a run option of index and update (--batch) more than a setting: left out of the settings.yaml `init` writes
    batch: BatchConfig = Field(default_factory=BatchConfig, exclude=True)

    root_dir: Path = Field(Path("."), exclude=True, description="the project's folder (set by the loader)")
    settings_file: Path | None = Field(None, exclude=True, description="the settings file (set by the loader)")
    compat_notes: list[str] = Field(default_factory=list, exclude=True, description="keys of a Microsoft GraphRAG "
                                    "settings file accepted but ignored, with why (set by the loader)")

    def section_fingerprint(self, names: typing.Iterable[str]) -> dict[str, Any]:
        """What a stage's result depends on in some sections, as plain data: their values, the contents of
        the files they name (prompts), and the model string and call arguments of the models they use
        (not concurrency or limits, which change how fast, not what). Keys never reach fingerprints."""
        result: dict[str, Any] = {}
        for name in names:
            section = getattr(self, name)
            data = section.model_dump(mode="json")
            for key, value in section:
                if isinstance(value, Path) and value.is_file():
                    data[key] = hashlib.blake2b(value.read_bytes(), digest_size=16).hexdigest()
                if key.endswith("model_id") and value in self.models:
                    model = self.models[value]
                    data[key] = {"model": model.model, "call_args": model.call_args}
            result[name] = data
        return result


# ---------------------------------------------------------------- loading

_VAR = re.compile(r"\$(\$|\{([A-Za-z_][A-Za-z0-9_]*)\}|\{)")  # the last: a ${ that is no ${NAME}


def substitute_env(text: str, env: typing.Mapping[str, str | None], source: str) -> str:
    """Replace ${VAR} by its value; `$$` stands for a literal `$` (as in GraphRAG). Comment lines are left
    alone, so a commented-out key never needs its variable."""
    lines = []
    for number, full_line in enumerate(text.splitlines(keepends=True), start=1):
        line, comment = _split_comment(full_line)

        def replace(match: re.Match[str], number: int = number) -> str:
            if match.group(1) == "$":
                return "$"
            if match.group(1) == "{":  # unclosed, empty or not a name: would be used as it is, silently
                raise ConfigError(f"{source}:{number}: `{match.string[match.start():].strip()[:40]}` is not a complete "
                                  "${NAME} reference (letters, digits and _, closed by }); write $${ for a literal ${")
            name = match.group(2)
            value = env.get(name)
            if value is None:
                hint = " (with no key at all: `graphrag-lite index --method fast` needs none, and `graphrag-lite " \
                    "query ... --no-model` answers with the ranked evidence)" if name.endswith("_KEY") else ""
                raise ConfigError(f"{source}:{number}: environment variable {name} is not set; "
                                  f"set it in the environment or in a .env file beside {Path(source).name}{hint}")
            return value

        lines.append(_VAR.sub(replace, line) + comment)
    return "".join(lines)


def _split_comment(line: str) -> tuple[str, str]:
    """Split a YAML line into content and trailing comment (a # at the start or after a space, outside quotes)."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i], line[i:]
    return line, ""


def parse_override(item: str) -> tuple[list[str], Any]:
    """`section.key=value` -> (["section", "key"], value parsed as YAML, so 300 is an int)."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {item!r}: expected section.key=value, e.g. --set chunking.size=300")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.strip().split("."), value


Overrides = typing.Iterable[str] | typing.Mapping[str, Any]
# where overrides come from, for messages: one label ("--set"), or a label per dotted key
OverrideSources = str | typing.Mapping[str, str]


def override_items(overrides: Overrides) -> list[tuple[list[str], Any]]:
    """`--set` strings (`chunking.size=300`) or a mapping of dotted keys to values, as (path, value) pairs."""
    if isinstance(overrides, typing.Mapping):
        return [(str(key).split("."), value) for key, value in overrides.items()]
    return [parse_override(item) for item in overrides]


def apply_overrides(data: dict[str, Any], overrides: Overrides) -> None:
    for path, value in override_items(overrides):
        node = data
        for part in path[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[path[-1]] = value


def find_config_file(root: Path, config: Path | None) -> Path:
    if config is not None:
        path = config if config.is_absolute() else Path.cwd() / config
        if not path.is_file():
            raise ConfigError(f"config file {config} not found")
        return path.resolve()
    for name in CONFIG_FILENAMES:
        if (root / name).is_file():
            return (root / name).resolve()
    raise ConfigError(f"no settings.yaml in {root.resolve()}; run `graphrag-lite init {root}` to create a "
                      "project there, or pass --config FILE")


def project_folder(settings: Path, root: Path) -> Path:
    """The project a settings file belongs to: the nearest folder from the file's own up to `root` that holds
    a settings file (output/settings.effective.yaml belongs to the project above it; a project nested in
    another is its own), else the file's folder."""
    if settings.is_relative_to(root):
        for folder in [settings.parent, *settings.parent.parents]:
            if any((folder / name).is_file() for name in CONFIG_FILENAMES):
                return folder
            if folder == root:
                break
    return settings.parent


def load_config(root: Path = Path("."), config: Path | None = None, overrides: Overrides = (),
                pipeline_settings: dict[str, Any] | None = None, overrides_from: OverrideSources = "--set"
                ) -> GraphRagConfig:
    """Read, substitute, override, validate and resolve a settings file. A pipeline's recommended settings
    apply over the file, and --set overrides over both."""
    return resolve_config(*read_settings(root, config), overrides, pipeline_settings, overrides_from)


def resolve_config(path: Path, data: dict[str, Any], overrides: Overrides = (),
                   pipeline_settings: dict[str, Any] | None = None, overrides_from: OverrideSources = "--set"
                   ) -> GraphRagConfig:
    """The configuration of a settings file's data (read_settings) in one pass: a Microsoft GraphRAG file's keys
    mapped, the pipeline's settings over the file's, `overrides` over both, validated and resolved."""
    notes: list[str] = []
    if is_graphrag_settings(data):  # a Microsoft GraphRAG file: its keys mapped, the ignored ones noted
        data, notes = translate_graphrag_settings(data)
    for section, values in (pipeline_settings or {}).items():
        if isinstance(values, dict) and isinstance(data.get(section), dict):
            data[section] = {**data[section], **values}
        else:
            data[section] = values
    cfg = config_from_data(data, path, overrides, overrides_from)
    if cfg.batch.enabled:  # a query, an experiment or prompt tuning would wait hours for its answers
        raise ConfigError(f"{path}: batch.enabled: batch mode is chosen per run, with `graphrag-lite index "
                          "--batch` or `update --batch`; remove batch.enabled from the settings")
    cfg.compat_notes = notes
    return cfg


def read_settings(root: Path = Path("."), config: Path | None = None) -> tuple[Path, dict[str, Any]]:
    """The settings file and its data, ${VAR}s substituted, not yet validated. The project's folder is `root`
    when it holds a settings file and the one given with --config lies inside it (output/
    settings.effective.yaml belongs to its project), else the settings file's; the .env beside the settings
    file, then the project's, give the ${VAR}s."""
    path = find_config_file(root, config)
    project = project_folder(path, root.resolve())
    dotenv = {k: v for folder in dict.fromkeys([project, path.parent]) if (folder / ".env").is_file()
              for k, v in dotenv_values(folder / ".env").items()}
    # Like GraphRAG, .env also reaches the environment (never overriding it), so provider libraries
    # find their usual variables (OPENAI_API_KEY, ...).
    for name, value in dotenv.items():
        if value is not None:
            os.environ.setdefault(name, value)
    text = substitute_env(path.read_text(encoding="utf-8"), {**dotenv, **os.environ}, str(path))
    data = yaml_mapping(text, path, "of sections at the top level")
    data["root_dir"] = str(project)  # what a file's own root_dir (a GraphRAG key) would say is not used
    return path, data


def yaml_mapping(text: str, path: Path, holding: str) -> dict[str, Any]:
    """The mapping a YAML file (a settings or an experiment file) holds; a ConfigError naming the file when it
    is not valid YAML or not a mapping (`holding`: what the mapping should hold, for the message)."""
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from err
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping {holding}")
    return data


def config_from_data(data: dict[str, Any], path: Path, overrides: Overrides = (),
                     overrides_from: OverrideSources = "--set") -> GraphRagConfig:
    """Validate settings data under `overrides`; an invalid override is blamed on `overrides_from` (the
    command line; or, by dotted key, the part of an experiment file that set it), anything else on the file."""
    # Models the file does not define keep their defaults, so a settings file (or --set) may name only
    # what it changes, e.g. models.default_chat_model.concurrency.
    user_models = data.get("models") or {}
    if isinstance(user_models, dict):
        defaults = {k: m.model_dump(exclude_unset=True) for k, m in _default_models().items()}
        data["models"] = {**defaults, **{k: {**defaults.get(k, {}), **v} if isinstance(v, dict) else v
                                         for k, v in user_models.items()}}
    items = override_items(overrides)
    apply_overrides(data, dict((".".join(p), v) for p, v in items))
    project = Path(data.pop("root_dir", None) or path.parent)
    data.pop("settings_file", None)
    for name in [k for k, v in data.items() if v is None]:  # `section:` with every key commented out
        data.pop(name)
    try:
        cfg = GraphRagConfig.model_validate(data)
    except ValidationError as err:
        overridden = {".".join(p) for p, _ in items}
        raise ConfigError(describe_validation_error(err, path.name, overridden, overrides_from)) from None
    cfg.root_dir, cfg.settings_file = project, path
    resolve_paths(cfg, path.parent)
    if "://" not in cfg.vector_store.db_uri and not Path(cfg.vector_store.db_uri).is_absolute():
        cfg.vector_store.db_uri = str((path.parent / cfg.vector_store.db_uri).resolve())
    check_model_references(cfg, path.name)
    if cfg.entity_resolution.overrides is not None:  # a broken overrides file is found before any model call
        from graphrag_lite.alias_overrides import read_alias_overrides  # with pandas: only for a project with one

        read_alias_overrides(cfg.entity_resolution.overrides)
    return cfg


def resolve_paths(model: BaseModel, root: Path) -> None:
    """Make every relative Path in the config absolute, relative to the config file's folder."""
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, Path) and not value.is_absolute():
            setattr(model, name, (root / value).resolve())
        elif isinstance(value, BaseModel):
            resolve_paths(value, root)


def check_model_references(cfg: GraphRagConfig, source: str) -> None:
    for section_name in type(cfg).model_fields:
        section = getattr(cfg, section_name)
        if not isinstance(section, BaseModel):
            continue
        for key in ("model_id", "chat_model_id", "embedding_model_id"):
            model_id = getattr(section, key, None)
            if model_id is not None and model_id not in cfg.models:
                raise ConfigError(f"{source}: {section_name}.{key} = {model_id!r} is not defined in `models`"
                                  f"{_suggest(model_id, cfg.models)}; defined: {', '.join(cfg.models) or 'none'}")


def describe_validation_error(err: ValidationError, file: str, overridden: typing.Collection[str] = (),
                              overrides_from: OverrideSources = "--set") -> str:
    """One line per problem: where it comes from (the file, or the override that set the key), the dotted
    key, what was given, what is expected, and a suggestion for typos."""
    lines = []
    for problem in err.errors():
        loc = [str(part) for part in problem["loc"]]
        key = ".".join(loc)
        setter = _set_by(key, overridden)
        source = file if setter is None else overrides_from if isinstance(overrides_from, str) else \
            overrides_from.get(setter, file)
        given = problem.get("input")
        if problem["type"] == "extra_forbidden":
            inner, _ = _walk(GraphRagConfig, loc[:-1])
            valid = list(inner.model_fields) if inner is not None else []
            lines.append(f"{source}: unknown key '{key}'{_suggest(loc[-1], valid, prefix=loc[:-1])}")
        elif problem["type"] == "value_error":  # a check of ours: its message says what is wrong and expected
            shown = "" if isinstance(given, dict) else f" = {given!r}"  # a section's check names its keys
            lines.append(f"{source}: {key}{shown}: {problem['msg'].removeprefix('Value error, ')}")
        else:
            _, annotation = _walk(GraphRagConfig, loc)
            # a value of the right type out of its range: pydantic's message says the range; the type would mislead
            typed = annotation is not None and problem["type"] not in OUT_OF_RANGE
            expected = f" (expected {_type_name(annotation)})" if typed else ""
            lines.append(f"{source}: {key} = {given!r}: {problem['msg']}{expected}")
    return "\n".join(lines)


# pydantic's error types for a value of the right type that breaks a bound of its field
OUT_OF_RANGE = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal", "multiple_of",
                          "too_short", "too_long", "string_too_short", "string_too_long"})


def _set_by(key: str, overridden: typing.Collection[str]) -> str | None:
    """The override that set this key, or a section that holds it, or a key inside it; None if none did."""
    return next((o for o in overridden if key == o or key.startswith(o + ".") or o.startswith(key + ".")), None)


def _suggest(name: str, valid: typing.Iterable[str], prefix: list[str] | None = None) -> str:
    close = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.5)
    return f"; did you mean '{'.'.join([*(prefix or []), close[0]])}'?" if close else ""


def _walk(model: type[BaseModel], loc: list[str]) -> tuple[type[BaseModel] | None, Any]:
    """Follow a validation-error location through the model classes: (innermost model, annotation)."""
    current: Any = model
    annotation: Any = None
    for part in loc:
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(part)
            if field is None:
                return None, None
            annotation = field.annotation
        elif typing.get_origin(current) is dict:  # a dict key such as a model id
            annotation = typing.get_args(current)[1]
        else:
            return None, annotation
        current = unwrap_optional(annotation)
    return (current if isinstance(current, type) and issubclass(current, BaseModel) else None), annotation


def unwrap_optional(annotation: Any) -> Any:
    """Optional[X] -> X."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _type_name(annotation: Any) -> str:
    if typing.get_origin(annotation) is Literal:
        return " | ".join(repr(a) for a in typing.get_args(annotation))
    if isinstance(annotation, type) and typing.get_origin(annotation) is None:
        return annotation.__name__
    return str(annotation).replace("typing.", "").replace("pathlib.", "").replace("pydantic.types.", "")


# ---------------------------------------------------------------- rendering settings.yaml from the model


def render_settings_yaml(cfg: GraphRagConfig, header: str = "") -> str:
    """settings.yaml text for a config: every key with its value and its description as a comment.
    Unset optional keys are written commented out, so users see what they can set."""
    lines = [header.rstrip() + "\n"] if header else []
    for name, field in type(cfg).model_fields.items():
        if field.exclude:
            continue
        value = getattr(cfg, name)
        if isinstance(value, BaseModel):
            lines.append(f"\n{name}:")
            lines.extend(_render_fields(value, indent=1))
        elif name == "models":
            lines.append(f"\n# {field.description}\nmodels:")
            for model_id, model in value.items():
                lines.append(f"  {model_id}:")
                lines.extend(_render_fields(model, indent=2, only_set=True))
        else:
            lines.append(f"# {field.description}\n{name}: {_yaml_value(value)}")
    return "\n".join(lines) + "\n"


def _render_fields(model: BaseModel, indent: int, only_set: bool = False) -> list[str]:
    pad = "  " * indent
    lines = []
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        if only_set and name not in model.model_fields_set:
            continue
        comment = f"  # {field.description}" if field.description else ""
        if value is None:
            lines.append(f"{pad}# {name}:{comment}")
        else:
            lines.append(f"{pad}{name}: {_yaml_value(value)}{comment}")
    return lines


def _yaml_value(value: Any) -> str:
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if isinstance(value, Path):
        value = value.as_posix()
    if isinstance(value, str) and value.startswith("${"):
        return value  # an environment reference stays unquoted and readable
    return yaml.safe_dump(value, default_flow_style=True, width=1000).strip().removesuffix("\n...").strip()


# what a query without a model (the CLI's --no-model, a server request's no_model) sets, per search method:
# its chat model, and the model that embeds or rates for it
NO_MODEL_SETTINGS = {"local": ("local_search.chat_model_id", "local_search.embedding_model_id"),
                     "global": ("global_search.chat_model_id", "global_search.dynamic_model_id"),
                     "basic": ("basic_search.chat_model_id", "basic_search.embedding_model_id")}


def no_model_overrides(method: str) -> list[str]:
    return [f"{key}=null" for key in NO_MODEL_SETTINGS[method]]
