"""Runner tampering: a candidate that makes the test run report success instead of fixing code.

Judged anywhere in the patch, not only in test files, because a source module is
imported by the tests too: exiting the process at import, patching the test
framework's internals, pytest hooks outside conftest.py, overriding builtins, and
test scripts that swallow the runner's exit code (`|| true`, `; exit 0`,
`set +e`...). Python is judged on its syntax tree (the post-patch file, rebuilt
from the original when the caller can read it), so a CLI's `sys.exit(main())`
under `if __name__ == "__main__":` or inside a function stays legitimate.
Only what the patch adds is judged.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from patchheal.pysource import parse_module
from patchheal.workspace import diffs

if TYPE_CHECKING:
    from unidiff.patch import PatchedFile

_EXITS = frozenset({"sys.exit", "os._exit", "exit", "quit", "os.abort", "posix._exit"})
_FRAMEWORKS = ("pytest", "_pytest", "unittest", "nose", "nose2")
# Attributes that decide whether a test ran and passed, on whatever object. Not `errors`,
# `failures` or `exitstatus`: ordinary code names its own attributes so.
_RESULT_ATTRS = frozenset(
    {
        "runtest",
        "wasSuccessful",
        "addFailure",
        "addError",
        "addSuccess",
        "addExpectedFailure",
        "addUnexpectedSuccess",
        "testsfailed",
    }
)
# Bare `Item`/`Function` bases are too common outside pytest: only pytest.Item and the like.
_RESULT_BASES = re.compile(
    r"(?:TestResult|TestRunner|TestProgram|TestSuite|TestCase)$|^_?pytest\.[\w.]*(?:Item|Function)$"
)
_RESULT_METHODS = frozenset(_RESULT_ATTRS | {"run", "__call__", "runTest", "main"})
_RUNNER_ENV = frozenset({"PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTHONPATH", "NODE_OPTIONS"})

_SCRIPT_FILES = re.compile(
    r"(?:^|/)(?:package\.json|[Mm]akefile|GNUmakefile|[\w.-]+\.mk|tox\.ini|noxfile\.py|"
    r"setup\.cfg|pyproject\.toml|pytest\.ini|\.gitlab-ci\.yml|\.github/workflows/[^/]+\.ya?ml)$"
)
# (pattern, what it does) for added lines of test scripts and runner configuration.
_SCRIPT_TRICKS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), why)
    for p, why in (
        (r"\|\|\s*(?:true|:|exit\s+0)\b|\|\|\s*:(?:\s|$|[\"'])", "swallows the runner's failure"),
        (r";\s*exit\s+0\b|&&\s*exit\s+0\b|^\s*exit\s+0\b", "forces exit code 0"),
        (r"\bset\s+\+e\b", "turns off failing on errors (set +e)"),
        (
            r"--passWithNoTests|--exit-zero|--no-fail|--suppress-no-test-exit-code",
            "passes on failure",
        ),
        (
            r"\bcontinue-on-error\s*:\s*true|\bignore_outcome\s*=\s*true|\bignore_errors\s*=\s*true",
            "ignores failures",
        ),
        (
            r"(?:^|\s)-k\s+[\"']?not\b|--deselect\b|-p\s*no:|--co\b|--collect-only\b",
            "changes which tests run",
        ),
        (
            r"\b(?:PYTEST_ADDOPTS|PYTEST_PLUGINS|PYTHONPATH|NODE_OPTIONS)\b",
            "overrides the runner's environment",
        ),
    )
)
# patchheal's own results channel, named by a patch in any file: reading the run's token
# (the collectors take it out of os.environ, but /proc/<pid>/environ keeps the process's
# original environment) or driving a collector directly is forging the verdict, never a fix.
_HARNESS_REFS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), why)
    for p, why in (
        (
            r"/proc/[^\s\"']*environ|[\"']/proc/?[\"'].{0,60}[\"']environ[\"']",
            "reads a process's original environment",
        ),
        (r"\bPATCHHEAL_(?:RESULTS|TRACE)\w*", "names patchheal's results channel"),
        (
            r"\bpatchheal_(?:results|pytest|unittest|airflow|trace)\b|patchheal-results",
            "names patchheal's test-result collectors",
        ),
    )
)
_TEST_WORDS = re.compile(
    r"(?i)(?<![a-z])test|pytest|jest|mocha|vitest|unittest|\btox\b|\bnox\b|\bcheck\b|\bspec\b"
)
_MAKE_TARGET = re.compile(r"^([\w./%-]+)\s*:(?!=)")


def runner_tampering(patched: PatchedFile, original: str | None) -> list[str]:
    """Reasons the patch to one file tampers with how tests run or report; [] if it does not."""
    paths = diffs.file_paths(patched)
    name = paths[-1] if paths else "?"
    if diffs.file_status(patched) == "deleted":
        return []
    reasons = list(_harness_refs(patched, name))
    if _SCRIPT_FILES.search(name):
        reasons.extend(_script_tricks(patched, name))
    if name.endswith(".py"):
        reasons.extend(_python_tricks(patched, name, original))
    return reasons


def _harness_refs(patched: PatchedFile, name: str) -> Iterator[str]:
    """Added lines, in a file of any kind, that reach for the results channel itself."""
    for hunk in patched:
        for line in hunk:
            if not line.is_added:
                continue
            text = line.value.rstrip("\n")
            for pattern, why in _HARNESS_REFS:
                if pattern.search(text):
                    yield f"{name}:{line.target_line_no}: {why} (`{text.strip()[:120]}`)"
                    break


def _script_tricks(patched: PatchedFile, name: str) -> Iterator[str]:
    makefile = "akefile" in name or name.endswith(".mk")
    for hunk in patched:
        target = ""
        for line in hunk:
            text = line.value.rstrip("\n")
            target_match = _MAKE_TARGET.match(text) if makefile else None
            if target_match:
                target = target_match.group(1)
            if not line.is_added:
                continue
            scope = f"{target} {text}" if makefile else text
            for pattern, why in _SCRIPT_TRICKS:
                # A general-purpose script line (an install step's `|| true`) is not a test run.
                if pattern.search(text) and (_TEST_WORDS.search(scope) or _runner_only(name)):
                    yield f"{name}:{line.target_line_no}: {why} (`{text.strip()}`)"
                    break


def _runner_only(name: str) -> bool:
    """Files whose every line configures the test runner."""
    return bool(re.search(r"(?:^|/)(?:pytest\.ini|tox\.ini|noxfile\.py)$", name))


def _python_tricks(patched: PatchedFile, name: str, original: str | None) -> list[str]:
    added = {ln.target_line_no for hunk in patched for ln in hunk if ln.is_added}
    text = post_patch_text(patched, original)
    tree = None
    if text is not None:
        try:
            tree = parse_module(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError, SystemError):
            tree = None  # what cannot be parsed is still read line by line below
    if tree is None:
        return list(_line_tricks(patched, name))
    conftest = name.rsplit("/", 1)[-1] == "conftest.py"
    return [
        f"{name}:{line}: {why}"
        for line, why in sorted(set(_tree_tricks(tree, conftest)))
        if line in added
    ]


def post_patch_text(patched: PatchedFile, original: str | None) -> str | None:
    """The file as the patch leaves it: the original with each hunk applied, or the added
    lines of a new file; None when it cannot be known."""
    if diffs.file_status(patched) == "added":
        return "".join(ln.value for hunk in patched for ln in hunk if ln.is_added)
    if original is None:
        return None
    lines = original.splitlines(keepends=True)
    out: list[str] = []
    pos = 0
    for hunk in patched:
        start = hunk.source_start - 1 if hunk.source_length else hunk.source_start
        if start < pos or start > len(lines):
            return None
        out.extend(lines[pos:start])
        pos = start
        for ln in hunk:
            if ln.is_added:
                out.append(ln.value)
            else:
                if ln.is_context:
                    out.append(ln.value)
                pos += 1
    out.extend(lines[pos:])
    return "".join(out)


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    return ""


def _is_main_guard(node: ast.If) -> bool:
    return "__name__" in ast.unparse(node.test) and "__main__" in ast.unparse(node.test)


def _tree_tricks(tree: ast.Module, conftest: bool) -> Iterator[tuple[int, str]]:
    yield from _import_time_exits(tree.body)
    for node in ast.walk(tree):
        yield from _node_tricks(node, conftest)


def _import_time_exits(body: list[ast.stmt]) -> Iterator[tuple[int, str]]:
    """Exits that run when the module is imported: module level and class bodies, not inside
    functions, not under `if __name__ == "__main__":`."""
    for stmt in body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if isinstance(stmt, ast.If) and _is_main_guard(stmt):
            yield from _import_time_exits(stmt.orelse)
            continue
        exits = ("SystemExit", "KeyboardInterrupt")
        if isinstance(stmt, ast.Raise) and stmt.exc is not None and _dotted(stmt.exc) in exits:
            yield stmt.lineno, "raises SystemExit when the module is imported"
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.Call) and _dotted(child.func) in _EXITS:
                yield child.lineno, f"calls {_dotted(child.func)}() when the module is imported"
        nested = [
            getattr(stmt, field, [])
            for field in ("body", "orelse", "finalbody", "handlers")
            if isinstance(getattr(stmt, field, None), list)
        ]
        for block in nested:
            yield from _import_time_exits([s for s in block if isinstance(s, ast.stmt)])
        for handler in getattr(stmt, "handlers", []):
            yield from _import_time_exits(handler.body)
        if isinstance(stmt, ast.Expr | ast.Assign) and isinstance(stmt.value, ast.Call):
            yield from _exits_in_call(stmt.value)


def _exits_in_call(call: ast.Call) -> Iterator[tuple[int, str]]:
    for node in ast.walk(call):
        if isinstance(node, ast.Call) and node is not call and _dotted(node.func) in _EXITS:
            yield node.lineno, f"calls {_dotted(node.func)}() when the module is imported"


def _node_tricks(node: ast.AST, conftest: bool) -> Iterator[tuple[int, str]]:
    if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            yield from _assignment_tricks(target)
    elif isinstance(node, ast.Call):
        func = _dotted(node.func)
        if func.endswith("setattr") and len(node.args) >= 2:
            owner, attr = _dotted(node.args[0]), node.args[1]
            attr_name = attr.value if isinstance(attr, ast.Constant) else ""
            if (
                str(attr_name) in _RESULT_ATTRS
                or owner.split(".")[0] in _FRAMEWORKS
                or owner.split(".")[0] == "builtins"
            ) or (isinstance(attr, ast.Constant) and str(attr.value).split(".")[0] in _FRAMEWORKS):
                yield node.lineno, f"patches test-framework internals (`{ast.unparse(node)[:100]}`)"
        if func == "atexit.register" and any(_dotted(a) in _EXITS for a in node.args):
            yield node.lineno, "registers a forced exit at interpreter shutdown"
        if func in ("os.putenv", "os.environ.setdefault", "os.environ.update") and any(
            isinstance(a, ast.Constant) and a.value in _RUNNER_ENV for a in node.args
        ):
            yield node.lineno, "overrides the test runner's environment"
    elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        if node.name.startswith("pytest_") and not conftest:
            yield node.lineno, f"defines the pytest hook {node.name}() outside conftest.py"
    elif isinstance(node, ast.ClassDef) and not conftest:  # conftest may define custom Items
        bases = [_dotted(b) for b in node.bases]
        if any(_RESULT_BASES.search(b) for b in bases):
            for item in node.body:
                if not isinstance(item, ast.FunctionDef) or item.name not in _RESULT_METHODS:
                    continue
                if not any(b.endswith("TestCase") for b in bases):
                    yield item.lineno, f"overrides {node.name}.{item.name}, how results are kept"
                elif item.name in ("run", "__call__"):
                    yield item.lineno, f"overrides {node.name}.{item.name}, how a test is run"


def _assignment_tricks(target: ast.AST) -> Iterator[tuple[int, str]]:
    line = getattr(target, "lineno", 0)
    if isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _assignment_tricks(element)
        return
    name = _dotted(target) if not isinstance(target, ast.Subscript) else _dotted(target.value)
    root = name.split(".")[0]
    if isinstance(target, ast.Name) and name in ("pytest_plugins", "__builtins__"):
        yield line, f"assigns {name}, which changes how tests run"
    elif isinstance(target, ast.Attribute) and (
        root in _FRAMEWORKS or root == "builtins" or target.attr in _RESULT_ATTRS
    ):
        yield line, f"patches test-framework internals or builtins (`{name} = ...`)"
    elif isinstance(target, ast.Subscript):
        key = target.slice.value if isinstance(target.slice, ast.Constant) else None
        if name == "sys.modules" and str(key).split(".")[0] in _FRAMEWORKS:
            yield line, f"replaces the module {key!r} in sys.modules"
        elif name == "os.environ" and key in _RUNNER_ENV:
            yield line, f"overrides the test runner's environment ({key})"
        elif name == "__builtins__":
            yield line, "overrides a builtin"


_LINE_EXIT = re.compile(r"^(?:sys\.exit|os\._exit|exit|quit)\s*\(|^raise\s+SystemExit\b")
_LINE_INTERNALS = re.compile(
    r"^\s*(?:(?:_?pytest|unittest|builtins)\.[\w.]+|[\w.]+\.(?:runtest|wasSuccessful|addFailure|"
    r"addError))\s*=(?!=)|\bsys\.modules\[\s*[\"'](?:_?pytest|unittest)"
)


def _line_tricks(patched: PatchedFile, name: str) -> Iterator[str]:
    """Without the whole file (it does not parse, or the original is unknown): added lines at
    column 0 are module level for certain; internals patching is recognised line by line."""
    for hunk in patched:
        for line in hunk:
            text = line.value.rstrip("\n")
            if not line.is_added:
                continue
            if _LINE_EXIT.match(text):
                yield f"{name}:{line.target_line_no}: exits when the module is imported"
            elif _LINE_INTERNALS.search(text):
                yield f"{name}:{line.target_line_no}: patches test-framework internals"
