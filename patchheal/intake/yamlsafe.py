"""YAML that cannot crash or exhaust patchheal: a bounded SafeLoader.

Measured (issue 25, spec fuzzing): a workflow nested 100,000 deep raised
RecursionError in PyYAML's recursive composer, and a 412-byte alias bomb (nine
anchors, each a list of nine aliases of the one before) became 5.7 GB and then a
MemoryError once the loaded data was walked. `load_yaml_file` refuses, with a
one-line `SpecError`:

- a file that is not a regular file or is over MAX_YAML_BYTES;
- nesting deeper than MAX_DEPTH (counted while composing, before any recursion
  can overflow);
- a document whose aliases, expanded, would hold more than MAX_EXPANDED_NODES
  nodes, or an alias inside its own anchor (a cycle that never ends when walked).

Anchors and aliases of ordinary size load as before: GitHub Actions workflows
may use them.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

from patchheal.errors import SpecError

MAX_YAML_BYTES = 1024 * 1024
MAX_DEPTH = 64
MAX_EXPANDED_NODES = 200_000


class _Refused(yaml.YAMLError):  # type: ignore[misc]
    pass


class BoundedSafeLoader(yaml.SafeLoader):  # type: ignore[misc]
    """SafeLoader with a depth limit while composing and an expanded-size check after."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(f"nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> Node | None:
        node = super().compose_document()
        if node is not None:
            _check_expansion(node)
        return node


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_expansion(root: Node) -> None:
    """Refuse a node graph whose expansion is too big or never ends (iterative, memoized)."""
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            total = 1 + sum(size[id(child)] for child in _children(node))
            if total > MAX_EXPANDED_NODES:
                raise _Refused(
                    f"its aliases expand to more than {MAX_EXPANDED_NODES} nodes (an alias bomb?)"
                )
            size[key] = total
            continue
        if key in size:
            continue
        if key in on_path:
            raise _Refused("an alias refers to a node that contains it (a cycle)")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in size)


def load_yaml_file(path: Path, what: str) -> Any:
    """The data of YAML file `path` (a workflow, a compose file), bounded; SpecError if not."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):  # a FIFO would block the read
            raise SpecError(f"{what} {path} is not a regular file")
        if info.st_size > MAX_YAML_BYTES:
            raise SpecError(f"{what} {path} is over {MAX_YAML_BYTES} bytes")
        text = path.read_bytes()[:MAX_YAML_BYTES].decode("utf-8")
    except SpecError:
        raise
    except (OSError, ValueError, RuntimeError) as exc:  # UnicodeDecodeError is a ValueError
        why = getattr(exc, "strerror", None) or _one_line(exc)
        raise SpecError(f"cannot read {what} {path}: {why}") from None
    return load_yaml_text(text, what, path)


def load_yaml_text(text: str, what: str, path: Path | str) -> Any:
    """The data of YAML `text` (of `path`, for messages), bounded; SpecError if not."""
    if len(text) > MAX_YAML_BYTES:
        raise SpecError(f"{what} {path} is over {MAX_YAML_BYTES} bytes")
    try:
        return yaml.load(text, Loader=BoundedSafeLoader)
    except _Refused as exc:
        raise SpecError(f"{what} {path} refused: {exc}") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{what} {path} is not valid YAML: {_one_line(exc)}") from None
    except RecursionError:  # a structure the composer's depth count did not see
        raise SpecError(f"{what} {path} is nested too deeply") from None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]
