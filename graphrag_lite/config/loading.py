"""Loading settings.yaml into the configuration model.

Section and key names follow Microsoft GraphRAG's settings.yaml where it has one, so users can carry
their configuration over. Loading substitutes ${VAR} from the environment and from a .env beside the file,
applies --set overrides, resolves relative paths against the config's folder, and turns every validation
problem into a message that names the key (and the closest valid key for a typo).
"""

from __future__ import annotations

import copy
import io
import os
import re
import typing
from pathlib import Path
from typing import Any

import yaml
from dotenv import dotenv_values
from pydantic import (
    BaseModel,
    ValidationError,
)

from graphrag_lite.compat import is_graphrag_settings
from graphrag_lite.compat import translate as translate_graphrag_settings
from graphrag_lite.config.messages import OverrideSources, describe_problems, describe_validation_error, quoted, suggest
from graphrag_lite.config.model import GraphRagConfig
from graphrag_lite.config.sections import default_models
from graphrag_lite.config.yaml_reading import parse_yaml, read_utf8_text
from graphrag_lite.errors import ConfigError
from graphrag_lite.object_storage.uris import remember

CONFIG_FILENAMES = ("settings.yaml", "settings.yml")


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
        raise ConfigError(f"--set {quoted(item)}: expected section.key=value, e.g. --set chunking.size=300")
    try:  # aliases past the budget, nesting too deep or a key twice are refused, as in a settings file
        value = parse_yaml(raw, f"--set {key.strip()[:60]}") if raw.strip() else ""
    except yaml.YAMLError:  # not YAML: the text as it is (a regular expression, say)
        value = raw
    return key.strip().split("."), value


Overrides = typing.Iterable[str] | typing.Mapping[str, Any]


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
    if pipeline_settings:
        check_replaced_values(data, pipeline_settings, path, overrides)
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
              for k, v in dotenv_values(stream=io.StringIO(read_utf8_text(folder / ".env"))).items()}
    # Like GraphRAG, .env also reaches the environment (never overriding it), so provider libraries
    # find their usual variables (OPENAI_API_KEY, ...).
    for name, value in dotenv.items():
        if value is not None:
            os.environ.setdefault(name, value)
    text = substitute_env(read_utf8_text(path), {**dotenv, **os.environ}, str(path))
    data = yaml_mapping(text, path, "of sections at the top level")
    data["root_dir"] = str(project)  # what a file's own root_dir (a GraphRAG key) would say is not used
    return path, data


def yaml_mapping(text: str, path: Path, holding: str) -> dict[str, Any]:
    """The mapping a YAML file (a settings or an experiment file) holds; a ConfigError naming the file when it
    is not valid YAML or not a mapping (`holding`: what the mapping should hold, for the message), and when
    yaml_reading refuses it (aliases past the budget, nesting too deep, a key twice)."""
    try:
        data = parse_yaml(text, str(path)) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {str(err)[:1000]}") from err
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping {holding}")
    return data


def config_from_data(data: dict[str, Any], path: Path, overrides: Overrides = (),
                     overrides_from: OverrideSources = "--set") -> GraphRagConfig:
    """Validate settings data under `overrides`; an invalid override is blamed on `overrides_from` (the
    command line; or, by dotted key, the part of an experiment file that set it), anything else on the file."""
    items = override_items(overrides)
    project = Path(_completed(data, items) or path.parent)
    try:
        cfg = GraphRagConfig.model_validate(data)
    except ValidationError as err:
        overridden = {".".join(p) for p, _ in items}
        raise ConfigError(describe_validation_error(err, path.name, overridden, overrides_from)) from None
    cfg.root_dir, cfg.settings_file = project, path
    resolve_paths(cfg, path.parent)
    place_working_copies(cfg)
    if cfg.vector_store.db_uri is None:
        cfg.vector_store.db_uri = str(cfg.output.base_dir / "lancedb")
    if "://" not in cfg.vector_store.db_uri and not Path(cfg.vector_store.db_uri).is_absolute():
        cfg.vector_store.db_uri = str((path.parent / cfg.vector_store.db_uri).resolve())
    check_model_references(cfg, path.name)
    if cfg.entity_resolution.overrides is not None:  # a broken overrides file is found before any model call
        from graphrag_lite.alias_overrides import read_alias_overrides  # with pandas: only for a project with one

        read_alias_overrides(cfg.entity_resolution.overrides)
    return cfg


def _completed(data: dict[str, Any], items: list[tuple[list[str], Any]]) -> str | None:
    """Settings data made ready to validate, in place: the default models kept, the overrides `items`
    applied, the sections left empty dropped; the root_dir it gives (read_settings's, or an override's)."""
    # Models the file does not define keep their defaults, so a settings file (or --set) may name only
    # what it changes, e.g. models.default_chat_model.concurrency.
    user_models = data.get("models") or {}
    if isinstance(user_models, dict):
        defaults = {k: m.model_dump(exclude_unset=True) for k, m in default_models().items()}
        data["models"] = {**defaults, **{k: {**defaults.get(k, {}), **v} if isinstance(v, dict) else v
                                         for k, v in user_models.items()}}
    apply_overrides(data, dict((".".join(p), v) for p, v in items))
    data.pop("settings_file", None)
    for name in [k for k, v in data.items() if v is None]:  # `section:` with every key commented out
        data.pop(name)
    return data.pop("root_dir", None)


def check_replaced_values(data: dict[str, Any], pipeline_settings: dict[str, Any], path: Path,
                          overrides: Overrides = ()) -> None:
    """A ConfigError when a value of the settings file that the pipeline's settings replace (and no override
    does) is invalid on its own: of the wrong type, out of its range, or a model not defined. It is the user's,
    and would otherwise vanish without a word. Whether values fit together (chunking.overlap below
    chunking.size) is checked on the settings the run uses, where the pipeline's may be what makes them fit."""
    items = override_items(overrides)
    overridden = [".".join(p) for p, _ in items]
    replaced = [key for key in _keys_replaced(data, pipeline_settings)
                if not any(key == o or key.startswith(o + ".") for o in overridden)]
    if not replaced:
        return
    user = copy.deepcopy(data)
    _completed(user, items)
    lines = []
    try:
        GraphRagConfig.model_validate(user)
    except ValidationError as err:
        problems = [p for p in err.errors() if _within(".".join(str(part) for part in p["loc"]), replaced)]
        lines += [describe_problems(problems, path.name)] if problems else []
    models = user["models"] if isinstance(user.get("models"), dict) else {}
    for key in (k for k in replaced if k.endswith("model_id")):
        section, name = key.split(".", 1)
        if isinstance(model_id := data[section][name], str) and model_id not in models:  # else: a type error above
            lines.append(f"{path.name}: {key} = {quoted(model_id)} is not defined in `models`")
    if lines:
        raise ConfigError("\n".join([*lines, "(the pipeline's `settings:` replace these values in this run; they "
                                     "are checked all the same: correct them, or remove them from the file)"]))


def _keys_replaced(data: dict[str, Any], pipeline_settings: dict[str, Any]) -> list[str]:
    """The dotted keys the file gives a value and the pipeline's settings replace it (section by section, as
    resolve_config lays them over the file)."""
    keys = []
    for section, values in pipeline_settings.items():
        if isinstance(values, dict) and isinstance(data.get(section), dict):
            keys += [f"{section}.{key}" for key in values if key in data[section]]
        elif data.get(section) is not None:
            keys.append(section)
    return keys


def _within(key: str, replaced: typing.Iterable[str]) -> bool:
    """Whether a problem's key is one of `replaced` or inside one (not a section that holds one: a check of
    the section as a whole, such as overlap below size, is about the values that run)."""
    return any(key == r or key.startswith(r + ".") for r in replaced)


def resolve_paths(model: BaseModel, root: Path) -> None:
    """Make every relative Path in the config absolute, relative to the config file's folder."""
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, Path) and not value.is_absolute():
            setattr(model, name, (root / value).resolve())
        elif isinstance(value, BaseModel):
            resolve_paths(value, root)


def place_working_copies(cfg: GraphRagConfig) -> None:
    """A base_dir on object storage becomes its working copy under object_storage.local_dir (remembered, so a
    reader given only the folder finds the remote it mirrors)."""
    for section in (cfg.input, cfg.cache, cfg.output):
        if (local := section.place_working_copy(cfg.object_storage.local_dir)) is not None:
            remember(local, str(section.remote))


def check_model_references(cfg: GraphRagConfig, source: str) -> None:
    for section_name in type(cfg).model_fields:
        section = getattr(cfg, section_name)
        if not isinstance(section, BaseModel):
            continue
        for key in ("model_id", "chat_model_id", "embedding_model_id"):
            model_id = getattr(section, key, None)
            if model_id is not None and model_id not in cfg.models:
                raise ConfigError(f"{source}: {section_name}.{key} = {quoted(model_id)} is not defined in `models`"
                                  f"{suggest(model_id, cfg.models)}; defined: {', '.join(cfg.models) or 'none'}")
