"""The scrubber's rule table: known token formats and detect-secrets' regex plugins.

Each rule has literal pre-filters so a clean log costs a few substring scans;
scrub.py applies them.
"""

from __future__ import annotations

import functools
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: re.Pattern[str]
    literals: tuple[str, ...] = ()  # run only when one occurs; () = always run
    lowered: bool = False  # literals are looked up in text.lower()
    group: int = 0  # mask this group only (0 = the whole match)
    multiline: bool = False  # may span lines: run on the whole text, not only hit lines
    anchored: bool = False  # every match starts with one of the literals
    # How sure a match's value must be a credential before it is masked (see `value_is_masked`):
    # "any" masks every match; "plausible" skips placeholders (`user:pass@host`); "random"
    # also skips code and prose (`password: str`, `basic skeleton`, `tokenizer: Tokenizer`).
    value_check: Literal["any", "plausible", "random"] = "any"


_PLACEHOLDER = re.compile(
    r"(?i)(?:pass(?:word)?|passwd|pwd|secret|changeme|dummy|example|placeholder|redacted|"
    r"foo|bar|baz|user(?:name)?|x+|\*+|\.+)\d*|<[^>]*>|\$\{[^}]*\}|\{\{.*\}\}|%\([^)]*\)s|\$\w+"
)
_WORDS = re.compile(r"[a-z]{4,}")
_LOWER_HEX = re.compile(r"[0-9a-f]+")
_CODE_NAME = re.compile(r"[A-Za-z_][A-Za-z_]*(?:\.[A-Za-z_]\w*)+|[A-Za-z_]+")
MIN_PLAUSIBLE_LENGTH = 6
MIN_RANDOM_LENGTH = 8


def value_is_masked(value: str, check: str) -> bool:
    """Whether a rule's matched value is a credential at the rule's level of `check`.

    plausible: at least 6 characters and not a placeholder (`pass`, `pass%20word`,
    `<password>`, `${TOKEN}`). random: also at least 8 characters mixing character classes,
    not mostly lowercase words (`keyfile_password`) and not a lowercase hex digest
    (published hashes, example keys in docs).
    """
    if check == "any":
        return True
    raw, value = value, value.strip("\"'")
    bare = urllib.parse.unquote(value)
    if len(value) < MIN_PLAUSIBLE_LENGTH or _PLACEHOLDER.fullmatch(re.sub(r"[\s_\-]", "", bare)):
        return False
    if check == "plausible":
        return True
    if len(value) < MIN_RANDOM_LENGTH or _LOWER_HEX.fullmatch(value):
        return False
    if value == raw and _CODE_NAME.fullmatch(value):  # unquoted `settings.SECRET_KEY`: code
        return False
    classes = (
        any(c.islower() for c in value)
        + any(c.isupper() for c in value)
        + any(c.isdigit() for c in value)
        + any(not c.isalnum() for c in value)
    )
    wordish = sum(map(len, _WORDS.findall(value)))
    return classes >= 2 and wordish < 0.5 * len(value)


# Anchored on the keyword (no leading name part): a leading `[\w.-]*` backtracks badly.
_KEYWORD = r"(?:secret|token|passw(?:or)?d|api_?key|access_?key|private_?key|credential)[\w.\-]*"
_KEYWORD_LITERALS = (
    "secret",
    "token",
    "passw",
    "apikey",
    "api_key",
    "accesskey",
    "access_key",
    "privatekey",
    "private_key",
    "credential",
)
# A value: a quoted literal, or a bare word that is not code (not followed by `(`, `[` or `.x`).
_VALUE = r"(?!(?:None|null|true|false|\d{1,5})\b)(\"[^\"\n]*\"|'[^'\n]*'|[^\s'\",;()\[\]{}<>]*[^\s'\",;()\[\]{}<>:](?=[\s,;'\"]|$))"  # noqa: E501

RULES: tuple[Rule, ...] = (
    Rule(
        "private_key",
        re.compile(
            r"(-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)(.*?)"
            r"(-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.DOTALL,
        ),
        ("PRIVATE KEY",),
        group=2,
        multiline=True,
    ),
    Rule(
        "putty_key",
        re.compile(r"(PuTTY-User-Key-File-\d:.*?)(?:\n\s*\n|\Z)", re.DOTALL),
        ("PuTTY-User-Key-File",),
        group=1,
        multiline=True,
    ),
    Rule(
        "url_password",
        re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@\"']+:([^\s@/\"']+)@"),
        ("://",),
        group=1,
        value_check="plausible",
    ),
    Rule(
        "authorization",
        re.compile(
            r"(?im)\b(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?"
            r"(?:(?:bearer|basic|token|digest|negotiate|bot)[ \t]+)?"
            r"(?!(?:bearer|basic|token|digest|negotiate|bot)\b)([^\s\"',;\[]+)"
        ),
        ("authorization",),
        lowered=True,
        group=1,
        value_check="plausible",
    ),
    Rule(
        "bearer",
        re.compile(r"(?i)\b(?:bearer|basic)[ \t]+([A-Za-z0-9._~+/\-]{8,}=*)"),
        ("bearer", "basic"),
        lowered=True,
        group=1,
        value_check="random",
    ),
    Rule(
        "aws_key_id",
        re.compile(r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
        ("A3T", "AKIA", "ASIA", "ABIA", "ACCA"),
    ),
    Rule("gcp_api_key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}"), ("AIza",)),
    Rule("gcp_oauth", re.compile(r"\bya29\.[0-9A-Za-z_\-]{20,}"), ("ya29.",)),
    Rule(
        "azure_client_secret",
        re.compile(r"\b[A-Za-z0-9_~.\-]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}"),
        ("Q~",),
    ),
    Rule("azure_sas", re.compile(r"\bsig=([A-Za-z0-9%+/=]{20,})"), ("sig=",), group=1),
    Rule(
        "azure_account_key",
        re.compile(r"(?i)AccountKey=([A-Za-z0-9+/=]{20,})"),
        ("accountkey",),
        lowered=True,
        group=1,
    ),
    Rule(
        "github",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9_]{30,}|github_pat_[A-Za-z0-9_]{20,})"),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    Rule(
        "gitlab",
        re.compile(r"\b(?:gl[a-z]{2,6}-|GR1348941)[A-Za-z0-9_\-]{20,}"),
        (
            "glpat-",
            "gldt-",
            "glft-",
            "glsoat-",
            "glrt-",
            "glcbt-",
            "glimt-",
            "glptt-",
            "gloas-",
            "glagent-",
            "GR1348941",
        ),
    ),
    Rule("slack", re.compile(r"\bxox[abposrte]-[A-Za-z0-9\-]{10,}"), ("xox",)),
    Rule(
        "slack_webhook",
        re.compile(r"hooks\.slack\.com/services/([A-Za-z0-9_/]+)"),
        ("hooks.slack",),
        group=1,
    ),
    Rule("sk_key", re.compile(r"\bsk-(?=[A-Za-z0-9_\-]*[0-9A-Z])[A-Za-z0-9_\-]{20,}"), ("sk-",)),
    Rule(
        "jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{2,}\.[A-Za-z0-9_\-]{2,}\.[A-Za-z0-9_\-]*"), ("eyJ",)
    ),
    Rule(
        "cli_flag",
        re.compile(
            r"(?i)--[a-z\-]*(?:password|token|secret|api-key|apikey)[a-z\-]*(?:=|[ \t]+)" + _VALUE
        ),
        ("password", "token", "secret", "api-key", "apikey"),
        lowered=True,
        group=1,
        value_check="random",
    ),
    Rule(
        "assignment",
        re.compile(r"(?i)" + _KEYWORD + r"[\"']?[ \t]*(?:=|:(?!:))(?!=)[ \t]*" + _VALUE),
        _KEYWORD_LITERALS,
        lowered=True,
        group=1,
        value_check="random",
        anchored=True,
    ),
)

# detect-secrets regex plugins taken as they are: (class name, pre-filter literals, lowered).
_DETECT_SECRETS_PLUGINS: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    ("AWSKeyDetector", ("aws",), True),
    ("AzureStorageKeyDetector", ("accountkey=",), True),
    ("DiscordBotTokenDetector", (), False),
    ("MailchimpDetector", ("-us",), False),
    ("NpmDetector", ("_authToken",), False),
    ("OpenAIDetector", ("T3BlbkFJ",), False),
    ("PypiTokenDetector", ("pypi-",), False),
    ("SendGridDetector", ("SG.",), False),
    ("SquareOAuthDetector", ("sq0csp-",), False),
    ("StripeDetector", ("k_live_",), False),
    ("TwilioKeyDetector", ("AC", "SK"), False),
)


@functools.cache
def detect_secrets_rules() -> tuple[Rule, ...]:
    # Imported here: detect-secrets costs ~0.1 s to import, paid once per process.
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    plugins: dict[str, Any] = get_mapping_from_secret_type_to_class()
    by_name = {cls.__name__: cls for cls in plugins.values()}
    rules = []
    for name, literals, lowered in _DETECT_SECRETS_PLUGINS:
        cls = by_name.get(name)
        for pattern in getattr(cls, "denylist", ()):
            # AWS's keyword pattern and npm's carry the secret in group 1; others are the secret.
            group = 1 if name in ("AWSKeyDetector", "NpmDetector") and pattern.groups else 0
            rules.append(Rule(f"ds:{name}", pattern, literals, lowered, group))
    return tuple(rules)


@functools.cache
def entropy() -> Callable[[str], float]:
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString

    measure: Callable[[str], float] = Base64HighEntropyString().calculate_shannon_entropy
    return measure
