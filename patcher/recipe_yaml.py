"""Recipe YAML in, plain data out: a safe loader that keeps each key's line, and the `X_file` include convention.

`compose_and_load(text)` gives the node tree and the data; `lines(node)` maps every key path (`("steps", 3,
"code")`) to its line, for errors; `load_code_files` replaces each `X_file: path` option by `X: <the file's text>`
(a `.yaml` file by its data), refusing paths outside the recipe's folder, include cycles and oversized reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

MAX_RECIPE_BYTES = 1_000_000  #: one YAML or code file of a recipe
MAX_INCLUDED_BYTES = 8_000_000  #: a recipe and everything it includes (`X_file:` options), all reads together
MAX_DEPTH = 64  #: nesting of mappings and lists in one YAML file (the flagship recipe needs 8)


def _refusal(message: str, mark: Any) -> yaml.YAMLError:
    return yaml.composer.ComposerError(None, None, message, mark)


class LineLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases (no "billion laughs") and nesting deeper than MAX_DEPTH (its composer
    recurses once per level); lines are collected from its node tree."""

    _depth = 0

    def compose_node(self, parent, index):  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise _refusal("YAML aliases (*name) are not allowed in recipes", mark)
        if self._depth >= MAX_DEPTH:
            raise _refusal(f"nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


_BOOL = "tag:yaml.org,2002:bool"


def _yaml12_booleans(loader: type) -> type:
    """`loader` reading only `true`/`false` as booleans, as YAML 1.2 does: YAML 1.1's `yes`, `no`, `on`, `off`
    stay strings (`dump_mode: off` is the text "off", not False, in a constant placed into code)."""
    resolvers = {first: [(tag, regexp) for tag, regexp in entries if tag != _BOOL]
                 for first, entries in loader.yaml_implicit_resolvers.items()}
    loader.yaml_implicit_resolvers = resolvers
    loader.add_implicit_resolver(_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
    return loader


def compose_and_load(text: str) -> tuple[yaml.Node | None, Any]:
    """The node tree (for line numbers) and the data of a YAML text, as `LineLoader` gives them, parsed once: by
    libyaml when PyYAML has it (ten times faster than the pure-Python parser, and a recipe's variant files run to
    thousands of lines). A text with an alias, or one libyaml refuses, is left to `LineLoader`, whose refusals and
    messages are the reference. Either way a key given twice in one mapping is refused (YAML says keys are unique;
    PyYAML would keep the last one silently), and so is nesting deeper than MAX_DEPTH."""
    fast = _FastLoader  # libyaml's parser and composer, PyYAML's resolver and constructor
    if fast is not None:
        loader = fast(text)
        try:
            node = loader.get_single_node()
            shape = None if node is None else _shape(node)
            if node is not None and shape is None:
                return node, loader.construct_document(node)
        except yaml.YAMLError:
            pass  # the reference loader below raises it, in its own words
        finally:
            loader.dispose()
    loader = LineLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None and (problem := _shape(node)) is not None:
            raise _refusal(*problem)
        return node, None if node is None else loader.construct_document(node)
    finally:
        loader.dispose()


def _shape(root: yaml.Node) -> tuple[str, Any] | None:
    """What makes a node tree unfit for a recipe, walked without recursion: an alias (the composer reuses its anchor's
    node: a node reached twice), a key given twice in a mapping, or nesting deeper than MAX_DEPTH. None if fit."""
    seen: set[int] = set()
    todo = [(root, 1)]
    while todo:
        node, depth = todo.pop()
        if id(node) in seen:
            return "YAML aliases (*name) are not allowed in recipes", node.start_mark
        seen.add(id(node))
        if depth > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels", node.start_mark
        if isinstance(node, yaml.MappingNode):
            keys: dict[Any, Any] = {}
            for key, value in node.value:
                k = key.value if isinstance(key, yaml.ScalarNode) else id(key)
                if k in keys:
                    return (f"key `{k}` is given twice in one mapping (line {keys[k].line + 1} and line "
                            f"{key.start_mark.line + 1}); YAML keys are unique", key.start_mark)
                keys[k] = key.start_mark
                todo += [(key, depth + 1), (value, depth + 1)]
        elif isinstance(node, yaml.SequenceNode):
            todo += [(item, depth + 1) for item in node.value]
    return None


def lines(node: yaml.Node, path: tuple = (), out: dict | None = None) -> dict[tuple, int]:
    out = {} if out is None else out
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            kpath = path + (key.value,)
            out[kpath] = key.start_mark.line + 1
            lines(value, kpath, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines(item, path + (i,), out)
    return out


class LineMap(dict):
    """{key path: line} of a recipe and the YAML files it includes; `files` names the included file of a path
    that comes from one (the others are the recipe's)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.files: dict[tuple, str] = {}

    def copy_line(self, dst: tuple, src: tuple | None, default: int | None = None) -> None:
        """Give `dst` the line (and file) of `src`, or of `src` given as `X_file`; else `default`."""
        for loc in (src, src[:-1] + (f"{src[-1]}_file",) if src and isinstance(src[-1], str) else None):
            if loc is not None and loc in self:
                self[dst] = self[loc]
                if loc in self.files:
                    self.files[dst] = self.files[loc]
                else:
                    self.files.pop(dst, None)
                return
        if default is not None:
            self[dst] = default

    def include(self, at: tuple, node: yaml.Node, file: Path) -> None:
        """The lines of an included YAML file whose data lands at `at`."""
        for loc, line in lines(node).items():
            self[at + loc] = line
            self.files[at + loc] = str(file)


def line_for(lines: dict[tuple, int], loc: tuple) -> int | None:
    loc = tuple(loc)
    while loc:
        if loc in lines:
            return lines[loc]
        loc = loc[:-1]
    return lines.get(())


def file_for(lines: dict[tuple, int], loc: tuple) -> str | None:
    """The included file a path comes from (None: the recipe itself), as `line_for` finds its line."""
    files = getattr(lines, "files", {})
    loc = tuple(loc)
    while loc:
        if loc in lines:
            return files.get(loc)
        loc = loc[:-1]
    return None


def inside(base: Path, rel: str) -> bool:
    """True when `rel` is a relative path that stays inside `base` (no `..`, not absolute)."""
    p = PurePosixPath(rel)
    return not (p.is_absolute() or rel.startswith(("/", "\\")) or ".." in p.parts or ":" in rel.split("/")[0])


@dataclass
class Reads:
    """What loading one recipe has read so far: the YAML files open now (an include of one of them is a cycle) and
    the bytes of every file read, bounded by MAX_INCLUDED_BYTES."""

    open: list[Path]
    total: int = 0
    lines: LineMap | None = None  #: where the lines of included YAML files go


def load_code_files(data: Any, folder: Path, path: tuple, errors: list, reads: Reads | None = None) -> Any:
    """Replace `X_file: rel` options by `X: <file text>`, refusing paths outside the recipe's folder, files that are
    not UTF-8 or too large, a YAML file that includes itself (directly or not), and more than MAX_INCLUDED_BYTES
    read in all."""
    reads = reads if reads is not None else Reads([])
    if isinstance(data, dict):
        out = {}
        for key, value in data.items():
            if isinstance(key, str) and key.endswith("_file") and isinstance(value, str) and key != "file":
                here = path + (key,)
                if "\0" in value:
                    errors.append((here, f"`{key}` contains a NUL byte"))
                    continue
                real = (folder / value).resolve()
                if not inside(folder, value) or not real.is_relative_to(folder.resolve()):
                    errors.append((here, f"`{key}: {value}` leaves the recipe's folder"))
                    continue
                if not real.is_file():
                    errors.append((here, f"`{key}: {value}`: no such file beside the recipe"))
                    continue
                if real in reads.open:
                    chain = " -> ".join(p.name for p in [*reads.open, real])
                    errors.append((here, f"`{key}: {value}` includes itself ({chain})"))
                    continue
                try:
                    raw = real.read_bytes()
                except OSError as exc:
                    errors.append((here, f"`{key}: {value}`: cannot read it ({exc.strerror or exc})"))
                    continue
                reads.total += len(raw)
                if len(raw) > MAX_RECIPE_BYTES or reads.total > MAX_INCLUDED_BYTES:
                    errors.append((here, f"`{key}: {value}`: larger than {MAX_RECIPE_BYTES} bytes" if
                                   len(raw) > MAX_RECIPE_BYTES else f"the recipe and the files it includes are "
                                   f"larger than {MAX_INCLUDED_BYTES} bytes in all"))
                    continue
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    errors.append((here, f"`{key}: {value}` is not UTF-8 text ({exc.reason} at byte {exc.start})"))
                    continue
                if real.suffix in (".yaml", ".yml"):  # structured options (e.g. `variants_file`) come as YAML
                    try:
                        reads.open.append(real)
                        node, included = compose_and_load(text)
                        if reads.lines is not None and node is not None and len(reads.open) == 2:
                            reads.lines.include(path + (key[: -len("_file")],), node, real)
                        out[key[: -len("_file")]] = load_code_files(included, real.parent, here, errors, reads)
                    except yaml.YAMLError as exc:
                        errors.append((here, f"`{value}` is not valid YAML: {exc}"))
                    finally:
                        reads.open.pop()
                else:
                    out[key[: -len("_file")]] = text
            else:
                out[key] = load_code_files(value, folder, path + (key,), errors, reads)
        return out
    if isinstance(data, list):
        return [load_code_files(v, folder, path + (i,), errors, reads) for i, v in enumerate(data)]
    return data


class YamlFloat(float):
    """A float read from a recipe, with the text it was written as (`2.10` is 2.1: a version written as a number
    loses a digit; a constant's check reads `text`)."""

    text: str = ""


def _float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float:
    value = YamlFloat(yaml.constructor.SafeConstructor.construct_yaml_float(loader, node))
    value.text = node.value
    return value


def plain_floats(data: Any) -> Any:
    """`data` with each `YamlFloat` a plain float (the model and the ledger take the value, not its text)."""
    if isinstance(data, YamlFloat):
        return float(data)
    if isinstance(data, dict):
        return {k: plain_floats(v) for k, v in data.items()}
    if isinstance(data, list):
        return [plain_floats(v) for v in data]
    return data


def _recipe_loader(loader: type) -> type:
    loader = _yaml12_booleans(loader)
    # YAML 1.2's floats also without a dot before the exponent (`1e-06`, what Python's repr writes): YAML 1.1 read
    # them as strings, and a constant `1e-06` went into code as the string '1e-06'
    loader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$"),
                                 list("-+0123456789"))
    loader.add_constructor("tag:yaml.org,2002:float", _float)
    return loader


_recipe_loader(LineLoader)
_FastLoader = _recipe_loader(type("_FastLoader", (yaml.CSafeLoader,), {})) if hasattr(yaml, "CSafeLoader") \
    else None
