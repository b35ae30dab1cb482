"""The projects of the real fixes besides calc: a string utility (parametrized tests), a date
parser as a unittest package (dotted ids), a stateful class, a package in a src/ layout."""

from __future__ import annotations

from tests.hostile.projects import PYPROJECT, Project, d

TEXTUTIL = d("""
    import re


    def slugify(text):
        return re.sub(r"[^a-z0-9]+", "-", text).strip("-")
""")
TEXT = Project(
    "textutil",
    {
        "textutil.py": TEXTUTIL,
        "pyproject.toml": PYPROJECT,
        "tests/test_textutil.py": d("""
            import pytest

            from textutil import slugify


            @pytest.mark.parametrize(
                ("text", "slug"),
                [("Hello World", "hello-world"), ("  Many   spaces ", "many-spaces"),
                 ("already-slug", "already-slug"), ("MiXeD 42", "mixed-42")],
                ids=["words", "spaces", "slug", "mixed"],
            )
            def test_slugify(text, slug):
                assert slugify(text) == slug
        """),
    },
    "pytest",
    "tests/test_textutil.py",
    (),
    (),
)
DATES = Project(
    "dates",
    {
        "dates/__init__.py": "from dates.parse import parse_date\n",
        "dates/parse.py": d("""
            import datetime


            def parse_date(text):
                \"\"\"'2024-03-05', or '05/03/2024' (day first).\"\"\"
                text = text.strip()
                if "/" in text:
                    return datetime.datetime.strptime(text, "%m/%d/%Y").date()
                return datetime.date.fromisoformat(text)
        """),
        "tests/__init__.py": "",
        "tests/test_parse.py": d("""
            import datetime
            import unittest

            from dates import parse_date


            class ParseTest(unittest.TestCase):
                def test_iso(self):
                    self.assertEqual(parse_date("2024-03-05"), datetime.date(2024, 3, 5))

                def test_day_first(self):
                    self.assertEqual(parse_date("05/03/2024"), datetime.date(2024, 3, 5))

                def test_day_first_late(self):
                    self.assertEqual(parse_date(" 25/12/2024"), datetime.date(2024, 12, 25))
        """),
    },
    "unittest",
    "tests.test_parse",
    (),
    (),
)
BANK = d("""
    class Account:
        def __init__(self, owner, balance=0):
            self.owner = owner
            self.balance = balance
            self.history = []

        def deposit(self, amount):
            if amount <= 0:
                raise ValueError("amount must be positive")
            self.balance += amount
            self.history.append(("deposit", amount))

        def withdraw(self, amount):
            if amount > self.balance:
                raise ValueError("insufficient funds")
            self.balance -= amount
            self.history.append(("deposit", amount))
""")
ACCOUNT = Project(
    "account",
    {
        "bank.py": BANK,
        "pyproject.toml": PYPROJECT,
        "tests/test_bank.py": d("""
            import pytest

            from bank import Account


            class TestAccount:
                def setup_method(self):
                    self.account = Account("ann", 100)

                def test_withdraw(self):
                    self.account.withdraw(30)
                    assert self.account.balance == 70

                def test_history(self):
                    self.account.deposit(5)
                    self.account.withdraw(3)
                    assert self.account.history == [("deposit", 5), ("withdraw", 3)]

                def test_overdraft(self):
                    with pytest.raises(ValueError):
                        self.account.withdraw(500)
        """),
    },
    "pytest",
    "tests/test_bank.py",
    (),
    (),
)
RULES = "THRESHOLD = 100\nRATE = 10  # the discount\n"
PRICING = d("""
    from shop import rules


    def total(subtotal):
        if subtotal > rules.THRESHOLD:
            return round(subtotal * (1 - rules.RATE), 2)
        return subtotal
""")
SHOP = Project(
    "shop",
    {
        "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["src"]\n',
        "src/shop/__init__.py": "",
        "src/shop/rules.py": RULES,
        "src/shop/pricing.py": PRICING,
        "tests/test_pricing.py": d("""
            from shop.pricing import total


            def test_below_threshold():
                assert total(50) == 50


            def test_at_threshold():
                assert total(100) == 90


            def test_above_threshold():
                assert total(200) == 180
        """),
    },
    "pytest",
    "tests/test_pricing.py",
    (),
    (),
)
