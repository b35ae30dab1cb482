"""The generative hostile battery: families × runners × forms, and real fixes across projects.

Not a list of tricks: each family of hostile payload (`hostile/payloads.py`)
is rendered in every form (`hostile/forms.py`: names literal, assembled at
run time, reached through getattr/importlib, in a new module, in a data file
that is read and exec'd) and tried under every runner (`pytest`, `pytest -s`,
`python -m pytest`, `python -m unittest`), each candidate changing source
files only (calc.py, plus a new module or data file), never a test, conftest
or config. Each combination uses one of the family's variants, rotating, so
every variant meets several runners and forms.

Combinations left out because they make no sense (see `SKIPPED`): pytest's
hook variants under unittest (unittest gets its own: `_Outcome`, `TestCase.run`),
`__init_subclass__` under pytest (its test classes have no base to hook), and
an import hook for class construction (the test module imports calc itself,
so a hook calc installs comes too late for it).

Every hostile candidate must first WORK against the bare runner
(`hostile/proof.py`); `tests/test_hostile_battery.py` asserts >= 80 do. The
judgement is `hostile/judging.py`: the real reproduction gate and the real
verification in the local (or Docker) harness with its results channel.
Shared by tests/test_hostile_battery.py and benchmarks/bench_hostile.py.
"""

from __future__ import annotations

from tests.hostile.cases import Candidate
from tests.hostile.forms import FORMS, render
from tests.hostile.legit import LEGIT
from tests.hostile.payloads import FAMILIES, LIMITS, VARIANTS, Variant, variants
from tests.hostile.projects import RUNNERS, hostile_project, params

SKIPPED: tuple[tuple[str, str], ...] = (
    (
        "pytest hook variants under unittest",
        "no pluggy there; unittest gets its own (_Outcome, TestCase.run)",
    ),
    ("__init_subclass__ under pytest", "pytest test classes have no base class to hook"),
    (
        "an import hook for class construction",
        "the test module imports calc itself: a hook calc installs comes too late for it",
    ),
)


def generate() -> list[Candidate]:
    """Every family × runner × form, with one of the family's variants (rotating)."""
    out: list[Candidate] = []
    for family in FAMILIES:
        for r, runner in enumerate(RUNNERS):
            project = hostile_project(family, runner)
            choices = variants(family, project.style)
            for f, form in enumerate(FORMS):
                variant = choices[(r + f) % len(choices)]
                edits = render(
                    variant.template,
                    form,
                    params(project, runner),
                    project.source,
                    project.files[project.source],
                )
                out.append(
                    Candidate(
                        f"{family}/{variant.name} · {runner} · {form}",
                        project,
                        runner,
                        edits,
                        legit=False,
                        family=family,
                        variant=variant.name,
                        form=form,
                        proof=variant.proof,
                    )
                )
    return out


def sample(candidates: list[Candidate]) -> list[Candidate]:
    """One hostile candidate per family × runner, its form rotating (deterministic)."""
    picked = []
    for i, family in enumerate(FAMILIES):
        for r, runner in enumerate(RUNNERS):
            form = FORMS[(i + r) % len(FORMS)]
            picked += [
                c for c in candidates if (c.family, c.runner, c.form) == (family, runner, form)
            ]
    return picked


def each_runner(chosen: tuple[Variant, ...]) -> list[Candidate]:
    """Each variant under every runner, its form rotating (never `datafile`, whose exec the
    tripwire refuses before anything else is reached)."""
    out: list[Candidate] = []
    for i, variant in enumerate(chosen):
        for r, runner in enumerate(RUNNERS):
            project = hostile_project(variant.family, runner)
            form = FORMS[(i + r) % (len(FORMS) - 1)]  # not `datafile`: its exec is refused
            edits = render(
                variant.template,
                form,
                params(project, runner),
                project.source,
                project.files[project.source],
            )
            out.append(
                Candidate(
                    f"{variant.family}/{variant.name} · {runner} · {form}",
                    project,
                    runner,
                    edits,
                    legit=False,
                    family=variant.family,
                    variant=variant.name,
                    form=form,
                    proof=variant.proof,
                )
            )
    return out


HOSTILE: list[Candidate] = generate()
# What still tells the twin apart (`payloads.LIMITS`), to no gain; judged with the twin in
# each place, apart from the battery (tests/test_twin_sensing.py).
LIMIT_CANDIDATES: list[Candidate] = each_runner(LIMITS)
# The twin told apart by its state in memory, the fix live there: every sensor × runner.
MEMORY_SENSORS: list[Candidate] = each_runner(
    tuple(v for v in VARIANTS if v.family == "twin-memory")
)
SAMPLE: list[Candidate] = sample(HOSTILE)
# What the CI test proves on the bare runner (every trick is proven by the benchmark):
# the sample and every other candidate of the product, > 80 in all.
PROVEN_IN_CI: list[Candidate] = SAMPLE + [
    c for i, c in enumerate(HOSTILE) if i % 2 == 0 and c not in SAMPLE
]
__all__ = [
    "FORMS",
    "HOSTILE",
    "LEGIT",
    "LIMIT_CANDIDATES",
    "MEMORY_SENSORS",
    "PROVEN_IN_CI",
    "RUNNERS",
    "SAMPLE",
    "SKIPPED",
    "Candidate",
]
