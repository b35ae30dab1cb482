"""A job spec is bounded before it is parsed (issue 34): a 200 KB spec naming a
100,000-part dotted table took tomllib 18-27 s to refuse; it is refused from its text,
with exit 2 and a clear message, and tomllib never sees it."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from patchheal.cli import main
from patchheal.config import load_spec
from patchheal.errors import EXIT_BAD_INPUT, SpecError
from patchheal.intake import rawspec
from tests.specfuzz import to_toml, valid_spec

# The user's spec: a valid one, then a table name of 100,000 parts (~200 KB).
EXPLOSION = "\n[" + ".".join(["a"] * 100_000) + "]\nx = 1\n"


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the texts tomllib parses from here on (a spy: it still parses)."""
    seen: list[int] = []
    real = tomllib.loads

    def spy(text: str, **kwargs: Any) -> dict[str, Any]:
        seen.append(len(text))
        return real(text, **kwargs)

    monkeypatch.setattr(tomllib, "loads", spy)
    return seen


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def test_a_100000_part_table_name_is_refused_before_tomllib_parses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], parsed: list[int]
) -> None:
    spec = tmp_path / "job.toml"
    spec.write_text(to_toml(valid_spec(tmp_path)) + EXPLOSION)
    assert 190_000 < spec.stat().st_size < rawspec.MAX_SPEC_BYTES  # not refused by size
    code, err = run(["heal", str(spec), "--print-spec"], capsys)
    assert code == EXIT_BAD_INPUT
    line = len(to_toml(valid_spec(tmp_path)).splitlines()) + 2
    assert f"line {line}: a dotted key or table name of more than 64 parts" in err
    assert "Traceback" not in err
    assert parsed == []  # refused from the text: the parser never ran on it


@pytest.mark.parametrize(
    "key",
    [
        ".".join(['"a"'] * 65),  # quoted parts count
        " . ".join(["a"] * 65),  # spaced dots
        "{ " + ".".join(["a"] * 65) + " = 1 }",  # inside an inline table
    ],
)
def test_every_form_of_a_long_dotted_key_is_refused(tmp_path: Path, key: str) -> None:
    spec = tmp_path / "job.toml"
    spec.write_text(to_toml(valid_spec(tmp_path)) + f"\n[extra]\nk = 1\n{key} = 1\n")
    with pytest.raises(SpecError, match="more than 64 parts"):
        load_spec(spec)


def test_the_same_explosion_in_the_repositorys_pyproject_is_refused(
    tmp_path: Path, parsed: list[int]
) -> None:
    data = valid_spec(tmp_path)
    repo = Path(data["job"]["repo"])
    (repo / "pyproject.toml").write_text("[project]\nname = 'x'\n" + EXPLOSION)
    spec = tmp_path / "job.toml"
    spec.write_text(to_toml(data))
    with pytest.raises(SpecError, match=r"pyproject\.toml: line 4: a dotted key"):
        load_spec(spec)
    assert len(parsed) == 1  # the job spec only


def test_an_oversized_spec_is_refused_by_its_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], parsed: list[int]
) -> None:
    spec = tmp_path / "job.toml"
    spec.write_text(to_toml(valid_spec(tmp_path)) + "# padding\n" * 30_000)
    code, err = run(["heal", str(spec), "--print-spec"], capsys)
    assert code == EXIT_BAD_INPUT
    assert f"is over {rawspec.MAX_SPEC_BYTES} bytes" in err
    assert parsed == []


def test_dots_where_a_spec_has_them_are_fine(tmp_path: Path) -> None:
    """Legitimate: dotted tables, dotted words in strings and commands, a 64-part key
    (at the limit) in a table the spec does not know is refused by the models, not here."""
    data = valid_spec(tmp_path)
    data["steps"][0]["command"] = "python -m pytest -q " + ".".join(["pkg"] * 80) + "::test"
    text = to_toml(data) + "\n# see docs.example.com/a.b.c\n"
    spec = tmp_path / "job.toml"
    spec.write_text(text)
    assert load_spec(spec).steps[0].command.count(".") == 79
    rawspec.check_toml_text("[" + ".".join(["a"] * 64) + "]\n", "x")  # at the limit: not here
