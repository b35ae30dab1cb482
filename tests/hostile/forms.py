"""One payload template, rendered in each form a hostile candidate can take.

A template is Python that names everything sensitive through four macros:
`_m("gc")` a module, `_g(obj, "name")` an attribute, `_s(obj, "name", value)`
(a statement) sets one, `_t("text")` a string that gives the trick away (an
environment variable, a path, a keyword such as `co_filename`). Upper-case
names listed in `params` are the project's facts (the test file, the test
ids, the runner's pass summary) and become constants. The forms:

* `literal`: plain Python (`import gc`, `gc.get_objects()`, `x.y = v`);
* `assembled`: no sensitive name appears whole: built at run time from pieces
  (`"g" + "c"`) or from `chr()` codes, used with `__import__`/`getattr`/`setattr`;
* `lookup`: names as strings, reached only through `importlib.import_module`,
  `getattr` and `setattr` (no import statement, no dotted access);
* `module`: the literal payload in a NEW module that the changed file imports;
* `datafile`: the literal payload in a data file that the changed file reads
  and hands to `exec` (the code never sits in a `.py` file).

Rendering goes through `ast` (parse, transform, unparse), so every form is
the same program; `tests/test_hostile_battery.py` proves each one works.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import PurePosixPath

FORMS = ("literal", "assembled", "lookup", "module", "datafile")
_MACROS = frozenset({"_m", "_g", "_s", "_t"})


def _const(value: object) -> ast.expr:
    return ast.parse(repr(value), mode="eval").body


def _string(node: ast.expr) -> str:
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        raise ValueError(f"a macro takes a string literal, got {ast.unparse(node)}")
    return node.value


class _Render(ast.NodeTransformer):
    """Replaces the macros by one style's way of naming things."""

    def __init__(self, style: str, params: Mapping[str, object]) -> None:
        self.style = style
        self.params = params
        self.imports: list[str] = []
        self._pieces = 0

    # -- how a name is written -------------------------------------------------
    def name(self, text: str) -> ast.expr:
        """The string `text` as this style writes it."""
        if self.style != "assembled":
            return ast.Constant(text)
        self._pieces += 1
        if self._pieces % 2:
            size = 1 if len(text) <= 3 else 2
            parts = [text[i : i + size] for i in range(0, len(text), size)] or [""]
            expr: ast.expr = ast.Constant(parts[0])
            for part in parts[1:]:
                expr = ast.BinOp(expr, ast.Add(), ast.Constant(part))
            return expr
        codes = ast.Tuple([ast.Constant(ord(c)) for c in text], ast.Load())
        mapped = ast.Call(ast.Name("map", ast.Load()), [ast.Name("chr", ast.Load()), codes], [])
        return ast.Call(ast.Attribute(ast.Constant(""), "join", ast.Load()), [mapped], [])

    def module(self, dotted: str) -> ast.expr:
        if self.style == "literal":
            if dotted not in self.imports:
                self.imports.append(dotted)
            head, *rest = dotted.split(".")
            expr: ast.expr = ast.Name(head, ast.Load())
            for part in rest:
                expr = ast.Attribute(expr, part, ast.Load())
            return expr
        if self.style == "lookup":
            if "importlib" not in self.imports:
                self.imports.append("importlib")
            load = ast.Attribute(ast.Name("importlib", ast.Load()), "import_module", ast.Load())
            return ast.Call(load, [ast.Constant(dotted)], [])
        fromlist = ast.keyword("fromlist", ast.List([ast.Constant("_")], ast.Load()))
        return ast.Call(ast.Name("__import__", ast.Load()), [self.name(dotted)], [fromlist])

    def _dotted_ok(self, attr: str) -> bool:
        return self.style == "literal" and attr.isidentifier()

    # -- the transformer -------------------------------------------------------
    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id in self.params and isinstance(node.ctx, ast.Load):
            return _const(self.params[node.id])
        return node

    def visit_Expr(self, node: ast.Expr) -> ast.stmt:
        call = node.value
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "_s":
            owner, attr, value = (self.visit(a) for a in call.args)
            text = _string(attr)
            if self._dotted_ok(text):
                target = ast.Attribute(owner, text, ast.Store())
                return ast.Assign([target], value, lineno=0)
            args = [owner, self.name(text), value]
            return ast.Expr(ast.Call(ast.Name("setattr", ast.Load()), args, []))
        return self.generic_visit(node)  # type: ignore[return-value]

    def visit_Call(self, node: ast.Call) -> ast.expr:
        func = node.func
        if isinstance(func, ast.Name) and func.id in _MACROS:
            args = [self.visit(arg) for arg in node.args]
            if func.id == "_m":
                return self.module(_string(args[0]))
            if func.id == "_t":
                return self.name(_string(args[0]))
            if func.id == "_g":
                owner, text = args[0], _string(args[1])
                if self._dotted_ok(text):
                    return ast.Attribute(owner, text, ast.Load())
                return ast.Call(ast.Name("getattr", ast.Load()), [owner, self.name(text)], [])
            raise ValueError("_s(...) is a statement of its own")
        node = self.generic_visit(node)  # type: ignore[assignment]
        return self._keywords(node)

    def _keywords(self, node: ast.Call) -> ast.Call:
        """`f(**{"co_name": x})` is written `f(co_name=x)` where names are literal."""
        if self.style != "literal":
            return node
        keywords: list[ast.keyword] = []
        for keyword in node.keywords:
            splat = keyword.value
            if keyword.arg is None and isinstance(splat, ast.Dict):
                keys = [k.value if isinstance(k, ast.Constant) else None for k in splat.keys]
                if all(isinstance(k, str) and k.isidentifier() for k in keys):
                    keywords += [
                        ast.keyword(str(k), v) for k, v in zip(keys, splat.values, strict=True)
                    ]
                    continue
            keywords.append(keyword)
        node.keywords = keywords
        return node


def render_code(template: str, style: str, params: Mapping[str, object]) -> str:
    """The template as Python source in `style` (literal, assembled or lookup)."""
    tree = ast.parse(template)
    renderer = _Render(style, params)
    tree = renderer.visit(tree)
    imports = [ast.Import([ast.alias(name)]) for name in renderer.imports]
    tree.body[:0] = imports
    source = ast.unparse(ast.fix_missing_locations(tree))
    left = {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)} & _MACROS
    if left:
        raise ValueError(f"macros left unrendered: {sorted(left)}")
    return source + "\n"


def render(
    template: str, form: str, params: Mapping[str, object], target: str, base: str
) -> dict[str, str]:
    """A candidate's edits: `target` (whose content is `base`) carrying the payload in `form`."""
    if form in {"literal", "assembled", "lookup"}:
        return {target: f"{base}\n\n{render_code(template, form, params)}"}
    payload = render_code(template, "literal", params)
    path = PurePosixPath(target)
    if form == "module":
        helper = path.with_name(f"{path.stem}_support.py")
        hook = f"import {helper.stem}  # noqa: E402, F401\n"
        return {target: f"{base}\n\n{hook}", str(helper): payload}
    if form == "datafile":
        data = path.with_name(f"{path.stem}_table.dat")
        hook = (
            "import pathlib  # noqa: E402\n\n"
            f"exec(pathlib.Path(__file__).with_name({data.name!r}).read_text())\n"
        )
        return {target: f"{base}\n\n{hook}", str(data): payload}
    raise ValueError(f"unknown form {form!r}; known: {', '.join(FORMS)}")
