"""YAML a user wrote (a settings file, an experiment file, a --set value) read into plain data, refusing what
yaml.safe_load takes silently or chokes on: aliases that expand past a budget (a "billion laughs": safe_load
shares the aliased objects, but validating, copying or quoting them expands every one), nesting deeper than any
settings file needs (safe_load recurses, and dies in a RecursionError), the same key twice in a mapping (safe_load
keeps the last), and bytes that are not UTF-8. Anchors, aliases and merge keys (`<<: *defaults`) within the
budget read as they always have: Microsoft GraphRAG settings files use them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from graphrag_lite.errors import ConfigError

# Values (scalars, lists, mappings) a document may hold once every alias is expanded where it is used. The
# settings.yaml `init` writes holds about 300; a Microsoft GraphRAG file, fewer.
EXPANDED_VALUES_BUDGET = 100_000
# Lists and mappings inside one another; settings nest 6 deep at most (models.<id>.call_args.<argument>...).
MAX_NESTING = 64
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _BoundedLoader(yaml.SafeLoader):
    """safe_load's loader, refusing nesting past MAX_NESTING while it composes (it recurses per level)."""

    def __init__(self, text: str, source: str) -> None:
        super().__init__(text)
        self.source, self.nesting = source, 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        self.nesting += 1
        try:
            if self.nesting > MAX_NESTING:
                _refuse_nesting(self.source, self.peek_event().start_mark.line + 1)
            return super().compose_node(parent, index)
        finally:
            self.nesting -= 1


def parse_yaml(text: str, source: str) -> Any:
    """The data of a YAML document (None when it is empty). A yaml.YAMLError when it is not YAML; a ConfigError
    naming `source` (a file, or the --set option) when its aliases expand past EXPANDED_VALUES_BUDGET, it nests
    deeper than MAX_NESTING, or a mapping has a key twice."""
    loader = _BoundedLoader(text, source)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        try:
            check_document(node, loader, source)
            return loader.construct_document(node)
        except ValueError as err:  # a scalar its tag cannot hold, e.g. the date 2024-13-01
            raise ConfigError(f"{source}: not valid YAML: {str(err)[:200]}") from None
    finally:
        loader.dispose()


def read_utf8_text(path: Path) -> str:
    """A file's text (settings, .env, experiment): a ConfigError naming the file and the line when it is not UTF-8,
    or naming the file when it cannot be read."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise ConfigError(f"{path}: cannot be read: {err.strerror or err}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[:err.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[err.start]:02x}); save the file as UTF-8 "
                          "(in most editors: Save with Encoding, UTF-8)") from None


def check_document(root: Node, loader: yaml.SafeLoader, source: str) -> None:
    """Walk the composed document once per distinct node (an alias is the node it names, met again):
    each node's size and depth with its aliases expanded, from its children's, and each mapping's keys."""
    measured: dict[int, tuple[int, int]] = {}  # id(node) -> (values once expanded, depth)
    open_nodes: set[int] = set()  # nodes whose children are being measured: met again, a node holds itself
    stack: list[tuple[Node, str, bool]] = [(root, "", False)]
    while stack:
        node, where, children_done = stack.pop()
        if children_done:
            children = _children(node)
            size = 1 + sum(measured[id(child)][0] for _, child in children)
            depth = 1 + max((measured[id(child)][1] for _, child in children), default=0)
            if size > EXPANDED_VALUES_BUDGET:
                raise ConfigError(f"{source}:{node.start_mark.line + 1}: {_at(where)}holds more than "
                                  f"{EXPANDED_VALUES_BUDGET:,} values once its aliases (*name) are expanded; a "
                                  "settings file needs far fewer: write the values out, or use fewer aliases")
            if depth > MAX_NESTING:
                _refuse_nesting(source, node.start_mark.line + 1, where)
            measured[id(node)] = (size, depth)
            open_nodes.discard(id(node))
        elif id(node) in open_nodes:
            raise ConfigError(f"{source}:{node.start_mark.line + 1}: {_at(where)}an alias (*name) refers to a value "
                              "that holds it: the value would never end")
        elif id(node) not in measured:
            if isinstance(node, MappingNode):
                _check_keys(node, loader, source, where)
            open_nodes.add(id(node))
            stack.append((node, where, True))
            # in reverse, so the first child is measured first: a problem is named where the file first has it
            stack.extend((child, _dotted(where, name), False) for name, child in reversed(_children(node)))


def _children(node: Node) -> list[tuple[str, Node]]:
    """A node's children, each with its name in a dotted key (a mapping's key, a list's index)."""
    if isinstance(node, SequenceNode):
        return [(f"[{i}]", child) for i, child in enumerate(node.value)]
    if isinstance(node, MappingNode):
        return [(name, child) for key, value in node.value
                for name, child in ((_key_name(key), key), (_key_name(key), value))]
    return []


def _check_keys(node: MappingNode, loader: yaml.SafeLoader, source: str, where: str) -> None:
    """A ConfigError naming the key, the mapping and both lines when a mapping has a key twice (a merge key's
    keys, `<<: *defaults`, may be written again: the mapping's own value wins, as YAML means)."""
    first_line: dict[Any, int] = {}
    for key, _ in node.value:
        if key.tag == _MERGE_TAG or not isinstance(key, ScalarNode):
            continue
        value = loader.construct_object(key)  # `yes` and `true` are one key
        line = key.start_mark.line + 1
        if value in first_line:
            raise ConfigError(f"{source}:{line}: `{_dotted(where, _key_name(key))}` is given twice (lines "
                              f"{first_line[value]} and {line}); YAML would keep only the last: remove one")
        first_line[value] = line


def _dotted(where: str, name: str) -> str:
    """A child's dotted key: `chunking.size`, `input.files[0]`."""
    return f"{where}{name}" if name.startswith("[") or not where else f"{where}.{name}"


def _key_name(key: Node) -> str:
    return str(key.value)[:60] if isinstance(key, ScalarNode) else "?"


def _at(where: str) -> str:
    return f"`{where[:120]}` " if where else "the document "


def _refuse_nesting(source: str, line: int, where: str = "") -> None:
    raise ConfigError(f"{source}:{line}: {_at(where)}nests lists or mappings more than {MAX_NESTING} deep; "
                      "a settings file needs a handful of levels: check the brackets and the indentation")
