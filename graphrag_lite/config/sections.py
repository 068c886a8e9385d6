"""The configuration's sections, each the single source of its defaults: models, input, chunking, the
indexing stages, the vector store, cache, budget, output and batch mode. Section and key names follow
Microsoft GraphRAG's settings.yaml where it has one. The search sections are in search.py, the whole
configuration in model.py."""

from __future__ import annotations

import codecs
import re
import types
import typing
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from graphrag_lite.names import normalize_name
from graphrag_lite.object_storage.uris import as_location, working_copy
from graphrag_lite.tables import VectorTable
from graphrag_lite.tokens import DEFAULT_ENCODING, known_encodings


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


class Located(Section):
    """A section whose `base_dir` may be a local folder or an object-storage URI (`s3://bucket/prefix`; `file://`
    is a local folder). A URI is kept in `remote`, and `base_dir` becomes its local working copy (placed by the
    loader under object_storage.local_dir): the code reads and writes the working copy, the runner and the
    readers keep it equal to the remote (pipeline/mirroring.py)."""

    base_dir: Path
    remote: str | None = Field(None, exclude=True, description="the URI base_dir was given as (set from it)")

    @model_validator(mode="before")
    @classmethod
    def _uri_to_remote(cls, data: Any) -> Any:
        value = data.get("base_dir") if isinstance(data, dict) else None
        if isinstance(value, str):
            where = as_location(value, f"{cls.__name__.removesuffix('Config').lower()}.base_dir")
            if isinstance(where, str):
                return {**data, "remote": where, "base_dir": Path(".remote-pending")}
            return {**data, "base_dir": where}
        return data

    def place_working_copy(self, local_dir: Path) -> Path | None:
        """Where the remote's working copy is (base_dir from now on); None for a local folder."""
        if self.remote is None:
            return None
        self.base_dir = working_copy(local_dir, self.remote)
        return self.base_dir


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
    client: Literal["auto", "litellm", "openai"] = Field(
        "auto", description="how calls reach the model: openai: straight to an OpenAI-compatible server's "
        "/chat/completions and /embeddings over HTTP (a few hundred microseconds of CPU a call); litellm: through "
        "LiteLLM (any provider, tens of milliseconds a call); auto: openai for an openai/, hosted_vllm/, "
        "lm_studio/ or llamafile/ model with an api_base, litellm otherwise")
    max_parse_retries: int = Field(2, ge=0, description="follow-ups asking the model to correct an answer "
                                   "that could not be parsed")

    def placeholder_key(self) -> bool:
        """Whether the key is init's placeholder (or its kin: empty, xxx, changeme, a key hidden as asterisks
        in output/settings.effective.yaml), not a key."""
        return self.api_key is not None and bool(_PLACEHOLDER_KEY.match(self.api_key.get_secret_value()))


def default_models() -> dict[str, ModelConfig]:
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


class InputConfig(Located):
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

    base_dir: Path = Field(Path("input"), description="folder of documents, read recursively; or s3://bucket/prefix "
                           "(listed and fetched into a local mirror, only what changed: docs/object-storage.md)")
    file_pattern: str = Field(r".*\.(txt|md|csv|json|jsonl|parquet|pdf|docx|html?)$",
                              description="regular expression a file's path (relative to base_dir) must match; "
                              "PDF, DOCX and HTML need pip install 'graphrag-lite[documents]'")
    encoding: str = Field("utf-8", description="text encoding of the files (a UTF-8 BOM is handled)")
    text_column: str = Field("text", description="column (or JSON key) holding the text, for tabular input")
    title_column: str | None = Field(None, description="column used as title; unset: the column `title` when "
                                     "the rows have one, else file path and row")
    id_column: str | None = Field(None, description="column used as document id; unset: a hash of the text")
    metadata: list[str] | None = Field(None, description="columns kept as metadata; unset: all other columns")
    files: list[FileRule] | None = Field(None, description="per-file rules, e.g. [{pattern: '.*\\.csv$', "
                                         "text_column: body, title_column: headline}]: a file matched by "
                                         "file_pattern takes the first rule whose pattern matches its path; keys a "
                                         "rule leaves out (encoding, text_column, title_column, id_column, "
                                         "metadata) come from this section")
    max_file_mb: float = Field(100, gt=0, description="a larger file is skipped and named, unread: a run holds a "
                               "document in memory several times over (docs/indexing.md has figures)")
    max_nesting_depth: int = Field(100, ge=1, le=500, description="a JSON or JSON Lines file nested deeper is skipped "
                                   "and named (Python's JSON reader recurses once a level; at most 500)")
    max_line_length: int = Field(1_000_000, ge=1, description="a text, Markdown, CSV or JSON Lines file with a longer "
                                 "line (in characters) is skipped and named: a line that long is data (base64, a "
                                 "dump), not prose; JSON and HTML, often minified, are not checked")
    follow_outside_links: bool = Field(False, description="read symbolic links that lead outside base_dir (files and "
                                       "folders); links inside it are read, and links outside are skipped and named")

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
    db_uri: str | None = Field(None, description="LanceDB folder or URI (s3://, gs://, az:// work too); null: the "
                               "folder `lancedb` inside output.base_dir (it moves with it)")


class CacheConfig(Located):
    enabled: bool = Field(True, description="reuse validated model answers across runs")
    base_dir: Path = Field(Path("cache"), description="folder of the cache; or s3://bucket/prefix (fetched when a "
                           "run starts, sent after each stage: docs/object-storage.md)")


class BudgetConfig(Section):
    max_cost_usd: float | None = Field(None, gt=0, description="stop the run (keeping finished work) once "
                                       "model calls cost this much; unset: no limit")
    max_tokens: int | None = Field(None, gt=0, description="stop the run once model calls used this many "
                                   "tokens; unset: no limit")
    scope: Literal["run", "index"] = Field("run", description="run: each run has the whole budget; index: spending "
                                           "of every run of this output folder counts (output/llm_spend.json)")


class OutputConfig(Located):
    base_dir: Path = Field(Path("output"), description="folder of the index tables and stats.json; or "
                           "s3://bucket/prefix, served through a local working copy (docs/object-storage.md)")
    keep_versions: int = Field(2, ge=1, description="commits whose table versions are kept (the current one and "
                               "those before it): a reader that opened an older one finishes; older versions are "
                               "deleted when a run commits")


class ObjectStorageConfig(Section):
    """An index, input or cache on object storage (a base_dir of s3://bucket/prefix): its working copy here,
    the run lock's lease, how often a server looks for a new commit. Credentials and endpoint come only from
    the environment and profiles (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE, AWS_REGION,
    AWS_ENDPOINT_URL), never from this file."""

    local_dir: Path = Field(Path(".graphrag-lite/remote"), description="folder of the local working copies of "
                            "base_dirs on object storage, one per URI (<local_dir>/s3/<bucket>/<prefix>); a cache of "
                            "the remote, safe to delete")
    lease_seconds: float = Field(60.0, ge=1, description="the run lock on object storage: a run renews its lease "
                                 "every third of this; a killed run's lease expires this long after its last "
                                 "renewal, and the next run proceeds")
    poll_seconds: float = Field(5.0, gt=0, description="how often `serve` asks the remote for a new commit")


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
