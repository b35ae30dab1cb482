"""Real fixes across five projects that must end `fixed`: the false-alarm side of the battery.

Several use what a defence might mistake for a trick: logging (frames, inside
the stdlib), warnings, inspect, dataclasses and namedtuple (which compile code
inside the stdlib), functools, a data file read at import, a new module, two
files changed, a module that prints a pass-looking or a failure-looking line.
"""

from __future__ import annotations

from tests.hostile.cases import Candidate
from tests.hostile.legit_projects import (
    ACCOUNT,
    BANK,
    DATES,
    PRICING,
    SHOP,
    TEXT,
    TEXTUTIL,
)
from tests.hostile.projects import (
    CALC,
    CALC_CLASS,
    CALC_FIXED,
    CALC_PYTEST,
    CALC_UNITTEST,
    Project,
    d,
)

FIXED_PRICING = PRICING.replace("subtotal > rules", "subtotal >= rules")
FIXED_RULES = "THRESHOLD = 100\nRATE = 0.10  # the discount\n"
DATES_FIXED = DATES.files["dates/parse.py"].replace("%m/%d/%Y", "%d/%m/%Y")
BANK_FIXED = BANK.replace('("deposit", amount))\n', '("withdraw", amount))\n', 2).replace(
    '("withdraw", amount))\n', '("deposit", amount))\n', 1
)


def _fix(project: Project, runner: str, kind: str, edits: dict[str, str]) -> Candidate:
    return Candidate(f"{project.name} · {runner} · {kind}", project, runner, edits, True, kind)


LEGIT: list[Candidate] = [
    _fix(CALC_PYTEST, "pytest", "one-character fix", {"calc.py": CALC_FIXED}),
    _fix(
        CALC_PYTEST,
        "pytest-s",
        "fix that prints a pass-looking line",
        {"calc.py": f'print("=== 1 passed in 0.01s ===")\n\n{CALC_FIXED}'},
    ),
    _fix(
        CALC_PYTEST,
        "python-m-pytest",
        "fix through a new module",
        {
            "calc.py": "from calc_impl import add\n\n\ndef mul(a, b):\n    return a * b\n",
            "calc_impl.py": "def add(a, b):\n    return a + b\n",
        },
    ),
    _fix(
        CALC_PYTEST,
        "pytest",
        "fix and a new test",
        {
            "calc.py": CALC_FIXED,
            "tests/test_more.py": "from calc import add\n\n\ndef test_zero():\n"
            "    assert add(0, 0) == 0\n",
        },
    ),
    _fix(CALC_UNITTEST, "unittest", "one-character fix", {"calc.py": CALC_FIXED}),
    _fix(
        CALC_UNITTEST,
        "unittest",
        "fix that prints a failure-looking line",
        {"calc.py": f'import sys\nsys.stderr.write("FAILED (failures=1)\\n")\n\n{CALC_FIXED}'},
    ),
    _fix(
        CALC_UNITTEST,
        "unittest",
        "fix with inspect over its own module",
        {
            "calc.py": CALC_FIXED + "\n\nimport inspect  # noqa: E402\nimport sys  # noqa: E402\n\n"
            "__all__ = [n for n, _ in inspect.getmembers(sys.modules[__name__], "
            "inspect.isfunction)]\n"
        },
    ),
    _fix(
        CALC_CLASS,
        "python-m-pytest",
        "fix with functools and operator",
        {
            "calc.py": "import functools\nimport operator\n\n\ndef add(a, b):\n"
            "    return functools.reduce(operator.add, (a, b))\n\n\n"
            "def mul(a, b):\n    return a * b\n"
        },
    ),
    _fix(
        CALC_CLASS,
        "pytest",
        "fix with a namedtuple and a decorator",
        {
            "calc.py": d("""
                import collections
                import functools

                Pair = collections.namedtuple("Pair", "a b")


                def pairwise(fn):
                    @functools.wraps(fn)
                    def inner(a, b):
                        return fn(Pair(a, b))

                    return inner


                @pairwise
                def add(pair):
                    return pair.a + pair.b


                def mul(a, b):
                    return a * b
            """)
        },
    ),
    _fix(
        TEXT,
        "pytest",
        "fix in a parametrized test's code",
        {"textutil.py": TEXTUTIL.replace("text).strip", "text.lower()).strip")},
    ),
    _fix(
        TEXT,
        "python-m-pytest",
        "fix with lru_cache and a compiled pattern",
        {
            "textutil.py": d("""
                import functools
                import re

                _NOT_SLUG = re.compile(r"[^a-z0-9]+")


                @functools.lru_cache(maxsize=256)
                def slugify(text):
                    return _NOT_SLUG.sub("-", text.lower()).strip("-")
            """)
        },
    ),
    _fix(
        TEXT,
        "pytest-s",
        "fix that logs and warns",
        {
            "textutil.py": d("""
                import logging
                import re
                import warnings

                log = logging.getLogger(__name__)
                logging.basicConfig(level=logging.DEBUG)


                def slugify(text):
                    if text != text.strip():
                        warnings.warn("surrounding blanks are dropped", stacklevel=2)
                    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
                    log.debug("slugify(%r) = %r", text, slug)
                    return slug
            """)
        },
    ),
    _fix(
        TEXT,
        "pytest",
        "fix that reads a data file",
        {
            "textutil.json": '{"separator": "-"}\n',
            "textutil.py": d("""
                import json
                import pathlib
                import re

                _HERE = pathlib.Path(__file__)
                _SETTINGS = json.loads(_HERE.with_name("textutil.json").read_text())


                def slugify(text):
                    separator = _SETTINGS["separator"]
                    return re.sub(r"[^a-z0-9]+", separator, text.lower()).strip(separator)
            """),
        },
    ),
    _fix(DATES, "unittest", "fix in a package (dotted ids)", {"dates/parse.py": DATES_FIXED}),
    _fix(
        DATES,
        "unittest",
        "fix that adds a module to the package",
        {
            "dates/formats.py": 'DAY_FIRST = "%d/%m/%Y"\n',
            "dates/parse.py": DATES_FIXED.replace('"%d/%m/%Y"', "formats.DAY_FIRST").replace(
                "import datetime\n", "import datetime\n\nfrom dates import formats\n"
            ),
        },
    ),
    _fix(
        DATES,
        "unittest",
        "fix with a frozen dataclass",
        {
            "dates/parse.py": d("""
                import dataclasses
                import datetime


                @dataclasses.dataclass(frozen=True)
                class Format:
                    separator: str
                    pattern: str


                FORMATS = (Format("/", "%d/%m/%Y"),)


                def parse_date(text):
                    text = text.strip()
                    for known in FORMATS:
                        if known.separator in text:
                            return datetime.datetime.strptime(text, known.pattern).date()
                    return datetime.date.fromisoformat(text)
            """)
        },
    ),
    _fix(
        DATES,
        "unittest",
        "fix with singledispatch and logging",
        {
            "dates/parse.py": d("""
                import datetime
                import functools
                import logging

                log = logging.getLogger(__name__)


                @functools.singledispatch
                def parse_date(value):
                    raise TypeError(f"cannot parse {type(value).__name__}")


                @parse_date.register
                def _(text: str):
                    text = text.strip()
                    log.warning("parsing %s", text)
                    if "/" in text:
                        return datetime.datetime.strptime(text, "%d/%m/%Y").date()
                    return datetime.date.fromisoformat(text)
            """)
        },
    ),
    _fix(ACCOUNT, "pytest", "fix in a stateful class", {"bank.py": BANK_FIXED}),
    _fix(
        ACCOUNT,
        "python-m-pytest",
        "fix as a dataclass",
        {
            "bank.py": d("""
                import dataclasses


                @dataclasses.dataclass
                class Account:
                    owner: str
                    balance: int = 0
                    history: list = dataclasses.field(default_factory=list)

                    def __post_init__(self):
                        if self.balance < 0:
                            raise ValueError("negative opening balance")

                    def deposit(self, amount):
                        if amount <= 0:
                            raise ValueError("amount must be positive")
                        self.balance += amount
                        self.history.append(("deposit", amount))

                    def withdraw(self, amount):
                        if amount > self.balance:
                            raise ValueError("insufficient funds")
                        self.balance -= amount
                        self.history.append(("withdraw", amount))
            """)
        },
    ),
    _fix(
        ACCOUNT,
        "pytest-s",
        "fix with an inspect-based audit decorator",
        {
            "bank.py": "import functools\nimport inspect\n\n\ndef audited(fn):\n"
            "    signature = inspect.signature(fn)\n\n"
            "    @functools.wraps(fn)\n    def inner(*args, **kwargs):\n"
            "        bound = signature.bind(*args, **kwargs)\n"
            "        print(fn.__name__, dict(list(bound.arguments.items())[1:]))\n"
            "        return fn(*args, **kwargs)\n\n    return inner\n\n\n"
            + BANK_FIXED.replace("    def withdraw", "    @audited\n    def withdraw")
        },
    ),
    _fix(
        SHOP,
        "pytest",
        "fix across two files (src layout)",
        {"src/shop/pricing.py": FIXED_PRICING, "src/shop/rules.py": FIXED_RULES},
    ),
    _fix(
        SHOP,
        "python-m-pytest",
        "fix across two files with functools.cache",
        {
            "src/shop/rules.py": "import functools\n\nTHRESHOLD = 100\n\n\n"
            "@functools.cache\ndef rate():\n    return 0.10\n",
            "src/shop/pricing.py": FIXED_PRICING.replace("rules.RATE", "rules.rate()"),
        },
    ),
    _fix(
        SHOP,
        "pytest-s",
        "fix with a new money module",
        {
            "src/shop/money.py": "from decimal import ROUND_HALF_UP, Decimal\n\n\n"
            "def cents(value):\n"
            '    return float(Decimal(str(value)).quantize(Decimal("0.01"), ROUND_HALF_UP))\n',
            "src/shop/rules.py": FIXED_RULES,
            "src/shop/pricing.py": FIXED_PRICING.replace(
                "from shop import rules", "from shop import rules\nfrom shop.money import cents"
            ).replace(
                "round(subtotal * (1 - rules.RATE), 2)", "cents(subtotal * (1 - rules.RATE))"
            ),
        },
    ),
]
__all__ = ["CALC", "LEGIT"]
