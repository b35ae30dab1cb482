# ruff: noqa: E501  (the bugs are small programs embedded as strings, kept one statement a line)
"""The bugs of the failure corpus: small failing programs and how to run them.

Each bug is a project (files), a command, an expected class, and optionally a
context that starts a loopback server for it. `gen_corpus.py` runs each one
several times and records the logs.
"""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

Context = Callable[[Path], contextlib.AbstractContextManager[dict[str, str]]]


@contextlib.contextmanager
def no_context(project: Path) -> Iterator[dict[str, str]]:
    yield {}


def _http(status: int, reason: str, body: bytes = b"") -> Context:
    @contextlib.contextmanager
    def context(project: Path) -> Iterator[dict[str, str]]:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(status, reason)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield {"SERVICE_URL": f"http://127.0.0.1:{server.server_address[1]}/api/v1/items"}
        finally:
            server.shutdown()
            server.server_close()

    return context


def _tcp_server(answer: bool) -> Context:
    """Accepts connections and never answers (read timeouts), or answers non-TLS (TLS errors)."""
    return lambda project: _serve(answer)


@contextlib.contextmanager
def _serve(answer: bool) -> Iterator[dict[str, str]]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        held = []
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with contextlib.suppress(OSError):
                if answer and conn.recv(1, socket.MSG_PEEK):
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\nnot tls\n" * 4)
            held.append(conn)
        for conn in held:
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield {"SERVICE_PORT": str(listener.getsockname()[1])}
    finally:
        stop.set()
        thread.join()
        listener.close()


@contextlib.contextmanager
def _closed_port(project: Path) -> Iterator[dict[str, str]]:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now: connecting is refused
    yield {"DATABASE_URL": f"postgresql://app@127.0.0.1:{port}/app", "DB_PORT": str(port)}


def _wheel(directory: Path, name: str, version: str, requires: list[str]) -> None:
    dist = f"{name.replace('-', '_')}-{version}"
    meta = "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{meta}",
        f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: corpus\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist}.dist-info/RECORD": "",
    }
    with zipfile.ZipFile(directory / f"{dist}-py3-none-any.whl", "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)


def _conflicting_wheels(project: Path) -> None:
    wheels = project / "wheels"
    wheels.mkdir()
    _wheel(wheels, "corpus-app", "1.0", ["corpus-lib>=2", "corpus-plugin==1.0"])
    _wheel(wheels, "corpus-plugin", "1.0", ["corpus-lib<2"])
    _wheel(wheels, "corpus-lib", "1.5", [])
    _wheel(wheels, "corpus-lib", "2.1", [])


def _locked_dir(project: Path) -> None:
    locked = project / "locked"
    locked.mkdir()
    locked.chmod(0o555)


@dataclass(frozen=True)
class Bug:
    id: str
    expected_class: str
    kind: str  # traceback, pytest, unittest, junit, compiler, generic
    description: str
    files: dict[str, str]
    argv: tuple[str, ...]
    context: Context = no_context
    setup: Callable[[Path], None] | None = None
    fixed_cwd: bool = False  # run from the project root every time (test runners)
    timeout: float = 60.0
    runs: int = 0  # 0: the generator's default
    expect_failure: bool = True
    extra: dict[str, str] = field(default_factory=dict)


PY = "{python}"
PYTEST = (PY, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-o", "addopts=")
_SYS_PATH = "import os, sys\nsys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))\n"
_PYTEST_PROJECT = {"pytest.ini": "[pytest]\n", "conftest.py": "", "app/__init__.py": ""}
_JOB = ("{python}", "{project}/job.py")

BUGS: tuple[Bug, ...] = (
    Bug("tb_zerodiv", "code_bug", "traceback", "mean() of an empty batch",
        {"app/__init__.py": "", "app/stats.py": "def mean(values):\n    return sum(values) / len(values)\n",
         "app/main.py": _SYS_PATH + "import datetime, tempfile\nfrom app.stats import mean\n\n\n"
         "def report(batch):\n    print(f'{datetime.datetime.now().isoformat()} mean of batch in '\n"
         "          f'{tempfile.mkdtemp()} pid={os.getpid()}')\n    return mean(batch)\n\n\n"
         "if __name__ == '__main__':\n    report([])\n"},
        (PY, "{project}/app/main.py")),
    Bug("tb_chained_cause", "code_bug", "traceback", "KeyError re-raised as ConfigError from it",
        {"app/__init__.py": "", "app/config.py": _SYS_PATH + "import json, tempfile\n\n\n"
         "class ConfigError(Exception):\n    pass\n\n\ndef load(path):\n    with open(path) as fh:\n"
         "        data = json.load(fh)\n    try:\n        return data['database']['host']\n"
         "    except KeyError as exc:\n        raise ConfigError(f'config {path} lacks {exc}') from exc\n\n\n"
         "if __name__ == '__main__':\n    path = os.path.join(tempfile.mkdtemp(), 'settings.json')\n"
         "    with open(path, 'w') as fh:\n        json.dump({'database': {'port': 5432}}, fh)\n    load(path)\n"},
        (PY, "{project}/app/config.py")),
    Bug("tb_during_handling", "code_bug", "traceback", "AttributeError raised while handling ValueError",
        {"app/__init__.py": "", "app/ports.py": "def parse_port(text):\n    try:\n        return int(text)\n"
         "    except ValueError:\n        log = None\n        log.warning('bad port %r', text)\n\n\n"
         "if __name__ == '__main__':\n    parse_port('80a')\n"},
        (PY, "{project}/app/ports.py")),
    Bug("tb_set_order", "code_bug", "traceback", "message holds a set, a temp dir and an object address",
        {"app/__init__.py": "", "app/plugins.py": "import tempfile\n\n\nclass Registry:\n    def __init__(self):\n"
         "        self.names = {'alpha', 'beta', 'gamma', 'delta', 'epsilon'}\n\n    def check(self, allowed):\n"
         "        extra = self.names - allowed\n        if extra:\n"
         "            raise ValueError(f'unknown plugins {extra} in {tempfile.mkdtemp()} for {self!r}')\n\n\n"
         "if __name__ == '__main__':\n    Registry().check({'alpha'})\n"},
        (PY, "{project}/app/plugins.py")),
    Bug("tb_syntax", "code_bug", "traceback", "a module that does not compile",
        {"app/__init__.py": "", "app/broken.py": "def total(items):\n    return sum(i.price for i in items\n\n\nprint(total([]))\n"},
        (PY, "{project}/app/broken.py")),
    Bug("tb_missing_project_module", "code_bug", "traceback", "imports a module of the project that is gone",
        {"app/__init__.py": "", "app/main.py": _SYS_PATH + "import app.helpers\n\napp.helpers.run()\n"},
        (PY, "{project}/app/main.py")),
    Bug("tb_missing_thirdparty", "dependency_issue", "traceback", "imports a third-party package not installed",
        {"app/__init__.py": "", "app/pay.py": _SYS_PATH + "import stripe\n\nstripe.api_key = os.environ.get('K')\n"},
        (PY, "{project}/app/pay.py")),
    Bug("tb_recursion", "code_bug", "traceback", "unbounded recursion",
        {"app/__init__.py": "", "app/tree.py": "def walk(node):\n    return walk(node.get('child', node))\n\n\n"
         "if __name__ == '__main__':\n    walk({})\n"},
        (PY, "{project}/app/tree.py")),
    Bug("pt_assert", "code_bug", "pytest", "assertion introspection on a discount bug",
        _PYTEST_PROJECT | {"app/pricing.py": "def total(prices, discount):\n    return sum(prices) * discount\n",
         "tests/test_pricing.py": "from app.pricing import total\n\n\ndef test_total_applies_discount(tmp_path):\n"
         "    (tmp_path / 'prices.txt').write_text('10\\n20\\n')\n"
         "    prices = [int(x) for x in (tmp_path / 'prices.txt').read_text().split()]\n"
         "    print('prices from', tmp_path)\n    assert total(prices, 0.1) == 27\n"},
        (*PYTEST, "tests"), fixed_cwd=True),
    Bug("pt_multi", "code_bug", "pytest", "two failing tests and a fixture error",
        _PYTEST_PROJECT | {"app/inventory.py": "class Inventory:\n    def __init__(self):\n        self.items = {}\n\n"
         "    def restock(self, name, count):\n        self.items[name] = count\n\n"
         "    def remove(self, name):\n        self.items[name] -= 1\n\n"
         "    def report(self):\n        return self.summary.upper()\n",
         "tests/test_inventory.py": "import pytest\nfrom app.inventory import Inventory\n\n\n@pytest.fixture\n"
         "def report():\n    return Inventory().report()\n\n\ndef test_restock():\n    inv = Inventory()\n"
         "    inv.restock('apple', 3)\n    inv.restock('apple', 2)\n    assert inv.items == {'apple': 5, 'pear': 0}\n\n\n"
         "def test_remove():\n    Inventory().remove('plum')\n\n\ndef test_report(report):\n    assert report\n"},
        (*PYTEST, "-q", "tests"), fixed_cwd=True),
    Bug("pt_collect_error", "code_bug", "pytest", "a module of the project fails at import (NameError)",
        _PYTEST_PROJECT | {"app/api.py": "DEFAULT_TIMEOUT = TIMEOUT_SECONDS * 2\n",
         "tests/test_api.py": "from app.api import DEFAULT_TIMEOUT\n\n\ndef test_timeout():\n    assert DEFAULT_TIMEOUT\n"},
        (*PYTEST, "tests"), fixed_cwd=True),
    Bug("pt_thirdparty_missing", "dependency_issue", "pytest", "a test imports a package that is not installed",
        _PYTEST_PROJECT | {"tests/test_payments.py": "import stripe\n\n\ndef test_key():\n    assert stripe.api_key is None\n"},
        (*PYTEST, "tests"), fixed_cwd=True),
    Bug("pt_conn_refused", "infra_issue", "pytest", "the database service is not up",
        _PYTEST_PROJECT | {"app/db.py": "import os, socket\n\n\ndef connect():\n"
         "    print('connecting to', os.environ['DATABASE_URL'])\n"
         "    return socket.create_connection(('127.0.0.1', int(os.environ['DB_PORT'])), timeout=2)\n",
         "tests/test_db.py": "from app.db import connect\n\n\ndef test_connect():\n    assert connect()\n"},
        (*PYTEST, "tests"), context=_closed_port, fixed_cwd=True),
    Bug("pt_http_503", "infra_issue", "pytest", "an external service answers 503",
        _PYTEST_PROJECT | {"app/client.py": "import os, urllib.request\n\n\ndef fetch():\n"
         "    with urllib.request.urlopen(os.environ['SERVICE_URL'], timeout=5) as resp:\n        return resp.read()\n",
         "tests/test_client.py": "from app.client import fetch\n\n\ndef test_fetch():\n    assert fetch()\n"},
        (*PYTEST, "tests"), context=_http(503, "Service Unavailable"), fixed_cwd=True),
    Bug("pt_junit", "code_bug", "junit", "slugify joins with the wrong separator; JUnit XML recorded",
        _PYTEST_PROJECT | {"app/text.py": "def slugify(title):\n    return '_'.join(title.lower().split())\n",
         "tests/test_text.py": "from app.text import slugify\n\n\ndef test_slugify():\n"
         "    assert slugify('Hello Big World') == 'hello-big-world'\n\n\ndef test_empty():\n    assert slugify('') == ''\n"},
        (*PYTEST, "--junitxml=junit.xml", "tests"), fixed_cwd=True),
    Bug("pt_flaky", "flaky", "pytest", "a read that sometimes lands before the write (pass rate 4/6)",
        _PYTEST_PROJECT | {"app/store.py": "import os\n\n\ndef read_after_write():\n"
         "    # Stands in for a race: on some runs the read overtakes the write.\n"
         "    return 'stale' if int(os.environ.get('CORPUS_RUN', '1')) % 3 == 0 else 'written'\n",
         "tests/test_store.py": "from app.store import read_after_write\n\n\ndef test_read_after_write():\n"
         "    assert read_after_write() == 'written'\n"},
        (*PYTEST, "tests"), fixed_cwd=True, runs=6, expect_failure=False),
    Bug("ut_assert", "code_bug", "unittest", "versions compared as strings; and an error",
        {"app/__init__.py": "", "app/version.py": "def parse_version(text):\n    return tuple(text.split('.'))\n",
         "tests/__init__.py": "", "tests/test_version.py": "import unittest\nfrom app.version import parse_version\n\n\n"
         "class TestVersion(unittest.TestCase):\n    def test_order(self):\n"
         "        self.assertLess(parse_version('1.9'), parse_version('1.10'))\n\n    def test_bad(self):\n"
         "        parse_version(None)\n\n    def test_ok(self):\n        self.assertEqual(parse_version('1'), ('1',))\n"},
        (PY, "-m", "unittest", "discover", "-s", "tests", "-t", "."), fixed_cwd=True),
    Bug("ut_env_secret", "env_mismatch", "unittest", "the job's API token is not set",
        {"tests/__init__.py": "", "tests/test_sync.py": "import os, unittest\n\n\nclass TestSync(unittest.TestCase):\n"
         "    def setUp(self):\n        self.token = os.environ['PAYMENTS_API_TOKEN']\n\n"
         "    def test_sync(self):\n        self.assertTrue(self.token)\n"},
        (PY, "-m", "unittest", "discover", "-s", "tests", "-t", "."), fixed_cwd=True),
    Bug("gcc_error", "code_bug", "compiler", "C: an undeclared identifier",
        {"src/main.c": "#include <stdio.h>\n\nint main(void) {\n    int total = 3;\n    printf(\"%d\\n\", totl);\n"
         "    return 0;\n}\n"},
        ("gcc", "-c", "{project}/src/main.c", "-o", "/dev/null")),
    Bug("mypy_error", "code_bug", "compiler", "a type error found by mypy",
        {"app/__init__.py": "", "app/geometry.py": "def area(w: int, h: int) -> int:\n    return w * h\n\n\n"
         "print(area('3', 4))\n"},
        (PY, "-m", "mypy", "--no-incremental", "--cache-dir=/dev/null", "--no-error-summary", "app"), fixed_cwd=True),
    Bug("node_missing_module", "dependency_issue", "generic", "Node: a package that is not installed",
        {"index.js": "const pad = require('left-pad');\nconsole.log(pad('1', 3));\n"},
        ("node", "{project}/index.js")),
    Bug("node_type_error", "code_bug", "generic", "Node: reading a property of undefined",
        {"lib/cart.js": "function total(items) {\n  return items.reduce((s, i) => s + i.price.amount, 0);\n}\n"
         "module.exports = { total };\n",
         "index.js": "const { total } = require('./lib/cart');\nconsole.log(total([{ price: { amount: 2 } }, { name: 'x' }]));\n"},
        ("node", "{project}/index.js")),
    Bug("oom_killed", "infra_issue", "generic", "the process is SIGKILLed, as the OOM killer does",
        {"job.py": "import os, signal\nprint('loading 2000000 rows into memory', flush=True)\n"
         "os.kill(os.getpid(), signal.SIGKILL)\n"},
        ("bash", "-c", '"{python}" "{project}/job.py"; exit $?')),
    Bug("disk_full", "infra_issue", "traceback", "writing the report hits a full disk",
        {"job.py": "print('writing report')\nwith open('/dev/full', 'w') as fh:\n    fh.write('x' * 65536)\n"},
        _JOB),
    Bug("dns_failure", "infra_issue", "traceback", "the runner cannot resolve the artifact host",
        {"job.py": "import socket, urllib.request\n\n\ndef no_dns(*args, **kwargs):\n"
         "    # Stands in for a runner whose resolver is down; no query leaves the machine.\n"
         "    raise socket.gaierror(-3, 'Temporary failure in name resolution')\n\n\n"
         "socket.getaddrinfo = no_dns\nurllib.request.urlopen('https://artifacts.example.invalid/builds/latest.tar.gz')\n"},
        _JOB),
    Bug("tls_error", "infra_issue", "traceback", "TLS handshake with a server that does not speak TLS",
        {"job.py": "import os, socket, ssl\n\nctx = ssl.create_default_context()\n"
         "raw = socket.create_connection(('127.0.0.1', int(os.environ['SERVICE_PORT'])), timeout=5)\n"
         "ctx.wrap_socket(raw, server_hostname='api.example.invalid')\n"},
        _JOB, context=_tcp_server(answer=True)),
    Bug("http_429", "infra_issue", "traceback", "rate limited by an external API",
        {"job.py": "import os, urllib.request\nurllib.request.urlopen(os.environ['SERVICE_URL'], timeout=5)\n"},
        _JOB, context=_http(429, "Too Many Requests")),
    Bug("auth_401", "env_mismatch", "traceback", "the API rejects the job's credentials",
        {"job.py": "import os, urllib.request\nurllib.request.urlopen(os.environ['SERVICE_URL'], timeout=5)\n"},
        _JOB, context=_http(401, "Unauthorized")),
    Bug("permission_denied", "env_mismatch", "traceback", "the step's user cannot write its output dir",
        {"job.py": "import os\nif os.getuid() == 0:\n    os.setgid(65534)\n    os.setuid(65534)\n"
         "out = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'locked', 'out.txt')\n"
         "with open(out, 'w') as fh:\n    fh.write('report')\n"},
        _JOB, setup=_locked_dir),
    Bug("pip_conflict", "dependency_issue", "generic", "pip cannot resolve conflicting requirements",
        {"requirements.txt": "corpus-app\n"},
        (PY, "-m", "pip", "install", "--dry-run", "--no-index", "--disable-pip-version-check",
         "--find-links", "{project}/wheels", "corpus-app"), setup=_conflicting_wheels),
    Bug("missing_input", "data_issue", "traceback", "today's input file was not delivered",
        {"pipeline.py": "import datetime, os\n\nday = datetime.date.today().isoformat()\n"
         "path = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', 'incoming', f'orders-{day}.csv')\n"
         "print('loading', path)\nwith open(path) as fh:\n    rows = fh.readlines()\n"},
        (PY, "{project}/pipeline.py")),
    Bug("constraint", "data_issue", "traceback", "a duplicate customer violates a UNIQUE constraint",
        {"load.py": "import sqlite3\n\ndb = sqlite3.connect(':memory:')\n"
         "db.execute('CREATE TABLE customers (id INTEGER PRIMARY KEY, email TEXT UNIQUE NOT NULL)')\n"
         "rows = [('a@example.invalid',), ('b@example.invalid',), ('a@example.invalid',)]\n"
         "db.executemany('INSERT INTO customers (email) VALUES (?)', rows)\n"},
        (PY, "{project}/load.py")),
    Bug("artifact_missing", "data_issue", "generic", "the upstream job's artifact is not there",
        {"download.py": "import random, sys\nrun_id = random.randrange(10**9)\n"
         "print(f\"Downloading single artifact 'build-output' from run {run_id}\")\n"
         "print('Error: Unable to download artifact(s): Artifact not found for name: build-output', file=sys.stderr)\n"
         "print('Please ensure that your artifact is not expired and the artifact was uploaded using a compatible version.', file=sys.stderr)\n"
         "sys.exit(1)\n"},
        (PY, "{project}/download.py")),
    Bug("read_timeout", "infra_issue", "traceback", "a service accepts the connection and never answers",
        {"job.py": "import os, socket\n\nconn = socket.create_connection(('127.0.0.1', int(os.environ['SERVICE_PORT'])), timeout=0.5)\n"
         "conn.sendall(b'GET /health HTTP/1.0\\r\\n\\r\\n')\nprint(conn.recv(1024))\n"},
        _JOB, context=_tcp_server(answer=False)),
    Bug("wall_timeout", "infra_issue", "generic", "the step hangs past its wall-clock timeout",
        {"job.py": "import os, time\nprint('waiting for the lock on', os.path.dirname(os.path.abspath(__file__)), flush=True)\n"
         "time.sleep(30)\n"},
        _JOB, timeout=1.5),
)  # fmt: skip
