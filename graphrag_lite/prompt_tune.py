"""`graphrag-lite prompt-tune`: prompts fitted to a corpus, as GraphRAG's auto-tuning makes them.

From a seeded sample of the project's text units the chat model is asked for the corpus's domain (unless
given), the entity types that matter in it, and in-domain worked examples (it extracts from a few sample
units with the packaged prompt; only entities named in their text are kept). The packaged extraction prompts
(tuples and JSON) get those examples in place of their generic one and a line naming the domain; the
summary and report prompts get the domain. The files go to the project's prompts folder, and settings.yaml
gets `extract_graph.entity_types` and each prompt setting pointing at them (a line edit that keeps the
file's comments). Every reply is parsed strictly and asked again when unusable; a reply that stays
unusable stops the command with what the model said, and nothing is written.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from graphrag_lite.answer_parsing import ParseError, strip_reasoning
from graphrag_lite.config import GraphRagConfig
from graphrag_lite.errors import ConfigError, GraphragLiteError
from graphrag_lite.extraction.tuples import (
    COMPLETION_DELIMITER,
    RECORD_DELIMITER,
    TUPLE_DELIMITER,
    ParsedReply,
    parse_graph_reply,
)
from graphrag_lite.llm.errors import LLMCallError
from graphrag_lite.llm.gateway import Gateway
from graphrag_lite.prompts import fill, load_prompt, prompt_file
from graphrag_lite.resources import data_dir
from graphrag_lite.tokens import count_tokens, count_with

SAMPLE_TOKENS = 3000  # of sample text shown when asking for the domain and the entity types
EXAMPLE_TOKENS = 350  # longest text unit used as a worked example
# answer lengths: a phrase or a short list needs little, but a reasoning model thinks first; a model that
# loops (small local ones do) is stopped there, and its cut-off answer asked again
SHORT_ANSWER_TOKENS = 1000
EXAMPLE_ANSWER_TOKENS = 2500


@dataclass
class Tuning:
    domain: str
    entity_types: list[str]
    examples: list[tuple[str, ParsedReply]]  # (text, the records the model extracted from it)
    unusable_examples: int = 0  # sample units whose extraction gave no usable example (another was tried)


class TuningFailed(GraphragLiteError):
    """The model's replies could not be used; nothing was written."""

    exit_code = 4


def domain_parser(reply: str) -> str:
    """A short phrase: the first non-empty line, without a label, quotes or markdown."""
    lines = [ln.strip(" \t*_`#>-\"'") for ln in strip_reasoning(reply).splitlines()]
    line = next((ln for ln in lines if ln), "")
    line = re.sub(r"^(the\s+)?domain\s*(is)?\s*[:\-]?\s*", "", line, flags=re.IGNORECASE).strip(" .\"'")
    if not line or len(line.split()) > 20:
        raise ParseError("answer with the domain as one short phrase (at most 12 words), nothing else")
    return line


def entity_types_parser(reply: str) -> list[str]:
    """3-12 entity types from a JSON list (in a fence, or inside prose), lower case, without repeats."""
    text = strip_reasoning(reply)
    found = re.search(r"\[[^\[\]]*\]", text, re.DOTALL)
    try:
        values = json.loads(found.group(0)) if found else None
    except json.JSONDecodeError:
        values = None
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ParseError('answer with a JSON list of entity types, e.g. ["person", "organization", "place"]')
    types = list(dict.fromkeys(t for t in (re.sub(r"[^a-z0-9 _-]", "", v.lower()).strip() for v in values) if t))
    if not 2 <= len(types) <= 12:
        raise ParseError(f"give between 3 and 10 entity types; the list had {len(types)}")
    return types


def example_parser(text: str, types: list[str]) -> Callable[[str], ParsedReply]:
    """The records of an extraction reply fit to teach from: entities named in `text` (a worked example must
    not teach the model to invent), of one of `types`, each name once (its first type: a small model also
    lists a person as an organization); relationships between them, each pair once; at least two entities."""
    allowed = {t.upper() for t in types}

    def parse(reply: str) -> ParsedReply:
        parsed = parse_graph_reply(strip_reasoning(reply))
        lowered = text.lower()
        named = [e for e in parsed.entities if e.name.lower() in lowered and e.type.upper() in allowed]
        entities = list({e.name: e for e in reversed(named)}.values())[::-1]  # the first record of a name
        names = {e.name for e in entities}
        pairs = {frozenset((r.source, r.target)): r for r in reversed(parsed.relationships)
                 if r.source in names and r.target in names and r.source != r.target}
        relationships = list(pairs.values())[::-1]
        if len(entities) < 2:
            raise ParseError("extract at least two entities named in the text, in the tuple format asked for")
        return ParsedReply(entities=entities, relationships=relationships, complete=True)

    return parse


def _joined(texts: list[str], budget: int) -> str:
    """The first texts whose tokens add up to at most `budget` (the first one whatever its size)."""
    kept, used = texts[:1], sum(count_tokens(text) for text in texts[:1])
    for text in texts[1:]:  # stops at the first that does not fit: no later text is counted
        used += count_tokens(text)
        if used > budget:
            break
        kept.append(text)
    return "\n\n---\n\n".join(kept)


DOMAIN_QUESTION = """Here are passages from a collection of documents.

{sample}

-Task-
In one short phrase (at most 12 words), what domain or subject are these documents about? Examples of
answers: "seventeenth-century English diary", "clinical trials of cardiac drugs", "municipal budget
reports". Reply with the phrase only."""

TYPES_QUESTION = """Here are passages from documents about {domain}.

{sample}

-Task-
A knowledge graph will be built from these documents. Which kinds of named things should it hold? Give
between 3 and 10 entity types, general enough that each covers many names in the documents (for example
"person", "organization", "place", "event", or types specific to the domain). Reply with a JSON list of
lower-case strings, for example ["person", "organization", "ship"], and nothing else."""


async def ask_tuning(gateway: Gateway, model_id: str, sample: list[str], domain: str | None, examples: int,
                     template: str) -> Tuning:
    """The domain, the entity types and worked examples, from the model."""
    async def ask(prompt: str, parse: Callable[[str], object], step: str) -> object:
        try:
            result = await gateway.chat(model_id, [{"role": "user", "content": prompt}], stage="prompt_tune",
                                        parse=parse, step=step, max_tokens=SHORT_ANSWER_TOKENS)
        except LLMCallError as err:
            raise TuningFailed(f"prompt-tune: the model's answer for the {step} could not be used: {err}; "
                               "nothing was written") from None
        return result.value

    shown = _joined(sample, SAMPLE_TOKENS)
    if not domain:
        domain = str(await ask(fill(DOMAIN_QUESTION, sample=shown), domain_parser, "domain"))
    types = await ask(fill(TYPES_QUESTION, domain=domain, sample=shown), entity_types_parser, "entity types")
    assert isinstance(types, list)
    whole = [_from_a_sentence_start(t) for t in sample]
    short = [t for t in whole if count_tokens(t) <= EXAMPLE_TOKENS] or \
        [_cut(t, EXAMPLE_TOKENS) for t in whole]
    worked: list[tuple[str, ParsedReply]] = []
    unusable = 0
    for text in short[:examples * 2]:  # a sample unit with too few names gives no example: try another
        if len(worked) == examples:
            break
        prompt = fill(template, entity_types=",".join(t.upper() for t in types), input_text=text)
        try:
            parsed = await gateway.chat(model_id, [{"role": "user", "content": prompt}], stage="prompt_tune",
                                        parse=example_parser(text, types), step="example",
                                        max_tokens=EXAMPLE_ANSWER_TOKENS)
        except LLMCallError:
            unusable += 1  # said in the command's output; another sample unit may do
            continue
        worked.append((text, parsed.value))
    return Tuning(domain, types, worked, unusable)


def _from_a_sentence_start(text: str) -> str:
    """A text unit that starts mid-sentence (chunks overlap and cut anywhere) from its first full sentence."""
    text = text.strip()
    if not text or text[0].isupper() or text[0] in "\"'\u201c\u2018([":
        return text
    found = re.search("[.!?][\"'\u201d\u2019)]?\\s+(?=[A-Z\"'\u201c\u2018])", text)
    return text[found.end():] if found else text


def _cut(text: str, tokens: int) -> str:
    while count_tokens(text) > tokens:
        text = text[: int(len(text) * 0.8)]
    return text


def example_as_tuples(text: str, records: ParsedReply, types: list[str]) -> str:
    rows = [f'("entity"{{tuple_delimiter}}{e.name}{{tuple_delimiter}}{e.type}{{tuple_delimiter}}{e.description})'
            for e in records.entities]
    rows += [f'("relationship"{{tuple_delimiter}}{r.source}{{tuple_delimiter}}{r.target}{{tuple_delimiter}}'
             f"{r.description}{{tuple_delimiter}}{int(r.strength)})" for r in records.relationships]
    return (f"Entity_types: {','.join(t.upper() for t in types)}\nText:\n{text}\nOutput:\n" +
            "\n{record_delimiter}\n".join(rows) + "\n{completion_delimiter}")


def example_as_json(text: str, records: ParsedReply, types: list[str]) -> str:
    data = {"entities": [{"name": e.name, "type": e.type, "description": e.description} for e in records.entities],
            "relationships": [{"source": r.source, "target": r.target, "description": r.description,
                               "strength": int(r.strength)} for r in records.relationships]}
    return f"Entity types: {','.join(t.upper() for t in types)}\nText:\n{text}\nOutput:\n{json.dumps(data)}"


def tuned_extraction(packaged: str, tuning: Tuning, render: Callable[[str, ParsedReply, list[str]], str]) -> str:
    """The packaged extraction prompt with the domain named and the corpus's own worked examples in place of
    its generic one (kept when the model gave none)."""
    head, example, rest = packaged.partition("-Example-\n")
    _generic, real, tail = rest.partition("-Real Data-")
    intro = f"The documents are about {tuning.domain}.\n\n"
    if not tuning.examples or not example:
        return intro + packaged
    examples = "\n\n".join(f"Example {i}:\n{render(text, records, tuning.entity_types)}"
                           for i, (text, records) in enumerate(tuning.examples, start=1))
    return intro + head + "-Examples-\n" + examples + "\n\n" + real + tail


def set_setting(text: str, section: str, key: str, value: str) -> str:
    """settings.yaml's text with `section.key: value` (value already YAML), changing only that line: the key's
    line (or its commented-out default) in the section is replaced, else added under the section's header,
    else the section is added at the end. The file's other lines and comments stay as they were."""
    lines = text.splitlines()
    header = next((i for i, ln in enumerate(lines) if re.match(rf"{re.escape(section)}:\s*(#.*)?$", ln)), None)
    if header is None:
        return text.rstrip("\n") + f"\n\n{section}:\n  {key}: {value}\n"
    end = next((i for i in range(header + 1, len(lines)) if lines[i] and not lines[i][0].isspace()
                and not lines[i].lstrip().startswith("#")), len(lines))
    pattern = re.compile(rf"\s+(#\s*)?{re.escape(key)}:")
    at = next((i for i in range(header + 1, end) if pattern.match(lines[i])), None)
    if at is None:
        lines.insert(header + 1, f"  {key}: {value}")
    else:  # the line's own comment stays (a commented-out default's too)
        after_key = re.sub(r"^\s*(#\s*)?", "", lines[at]).split(":", 1)[1]
        comment = re.search(r"\s+#\s.*$", after_key)
        lines[at] = f"  {key}: {value}" + (comment.group(0) if comment else "")
    return "\n".join(lines) + "\n"


TUNED_FILES = {("extract_graph", "prompt"): "extract_graph.txt", ("extract_graph", "json_prompt"):
               "extract_graph_json.txt", ("summarize_descriptions", "prompt"): "summarize_descriptions.txt",
               ("community_reports", "prompt"): "community_report.txt"}


def tuned_prompts(config: GraphRagConfig, tuning: Tuning) -> dict[tuple[str, str], str]:
    """(section, setting) -> the tuned prompt's text, from the packaged prompts."""
    packaged = {key: load_prompt(None, prompt_file(getattr(config, key[0]), key[1])) for key in TUNED_FILES}
    examples = {("extract_graph", "prompt"): example_as_tuples, ("extract_graph", "json_prompt"): example_as_json}
    # the extraction prompts get the corpus's own worked examples, the others a line naming the domain
    return {key: tuned_extraction(text, tuning, examples[key]) if key in examples else
            f"The texts are about {tuning.domain}.\n\n{text}" for key, text in packaged.items()}


def _keep_own_edits(path: Path, prompt: str) -> None:
    """A prompt file the user changed (it is neither the packaged one nor this tuning) is kept beside the new
    one as NAME.before-tune.txt, not overwritten."""
    if not path.is_file() or path.read_text(encoding="utf-8") == prompt:
        return
    packaged = load_prompt(None, path.name) if (data_dir("prompts") / path.name).is_file() else None
    if path.read_text(encoding="utf-8") != packaged:
        path.replace(path.with_name(f"{path.stem}.before-tune{path.suffix}"))


def write_tuned(config: GraphRagConfig, settings: Path, folder: Path, tuning: Tuning) -> list[Path]:
    """The tuned prompts in `folder`, and settings.yaml wired to them and to the tuned entity types; the
    settings are checked by loading them before anything is written."""
    from graphrag_lite.config import load_config

    text = previous = settings.read_text(encoding="utf-8")
    written = []
    for (section, setting), prompt in tuned_prompts(config, tuning).items():
        path = folder / TUNED_FILES[section, setting]
        written.append((path, prompt))
        relative = path.relative_to(settings.parent) if path.is_relative_to(settings.parent) else path
        text = set_setting(text, section, setting, str(relative))
    text = set_setting(text, "extract_graph", "entity_types", json.dumps(tuning.entity_types))
    folder.mkdir(parents=True, exist_ok=True)
    for path, prompt in written:
        _keep_own_edits(path, prompt)
        path.write_text(prompt, encoding="utf-8")
    settings.write_text(text, encoding="utf-8")
    try:
        load_config(settings.parent, settings)
    except ConfigError:
        settings.write_text(previous, encoding="utf-8")  # leave the project as it was
        raise
    return [path for path, _ in written]


def text_units(config: GraphRagConfig) -> pd.DataFrame:
    """The project's text units as the index would cut them, made in a scratch copy of the output folder
    (an index there is left as it was; its finished chunking is reused)."""
    from rich.console import Console

    from graphrag_lite.pipeline.committed import open_committed
    from graphrag_lite.pipeline.definition import Pipeline
    from graphrag_lite.pipeline.dry_run import scratch_copy
    from graphrag_lite.pipeline.runner import run_pipeline
    from graphrag_lite.stages import STAGES

    stages = [STAGES["load_documents"], STAGES["chunk_text"]]
    with scratch_copy(config) as trial:
        run_pipeline(trial, Pipeline("prompt-tune", "text units to sample", stages), Console(quiet=True), brief=True)
        return open_committed(trial.output.base_dir, trial.root_dir).store.read("base_text_units")


def tune_project(config: GraphRagConfig, settings: Path, folder: Path, domain: str | None = None,
                 limit: int = 15, examples: int = 2, seed: int = 0) -> tuple[Tuning, list[Path]]:
    """Sample, ask, write (see the module's docstring). Returns what was learned and the files written."""
    count_with(config.chunking.encoding_model)
    texts = [str(t) for t in text_units(config)["text"]]
    if not texts:
        raise ConfigError(f"no text in {config.input.base_dir}: put documents there before tuning prompts")
    sample = random.Random(seed).sample(texts, min(limit, len(texts)))
    template = fill(load_prompt(None, prompt_file(config.extract_graph, "prompt")), tuple_delimiter=TUPLE_DELIMITER,
                    record_delimiter=RECORD_DELIMITER, completion_delimiter=COMPLETION_DELIMITER)
    gateway = Gateway(config)
    tuning = asyncio.run(ask_tuning(gateway, config.extract_graph.model_id, sample, domain, examples, template))
    return tuning, write_tuned(config, settings, folder, tuning)
