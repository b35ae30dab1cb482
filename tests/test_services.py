"""Service images with no registry: a compose file with postgres and redis runs offline."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from harness_support import engine, labelled, python_def, python_image

from patchheal.errors import ImageBuildError, SpecError
from patchheal.harness.compose.harness import ComposeHarness
from patchheal.harness.definitions import load_harness
from patchheal.harness.images import services

__all__ = ["engine", "python_def", "python_image"]

# An ordinary CI compose file, as it would be committed to a repository: registry
# images, official-image environment variables, the usual health checks, a volume.
COMPOSE = """\
services:
  db:
    image: postgres:16
    environment:
      POSTGRES_USER: app
      POSTGRES_PASSWORD: s3cret-pw
      POSTGRES_DB: appdb
    volumes: ["pgdata:/var/lib/postgresql/data"]
    ports: ["5432:5432"]
    healthcheck:
      test: ["CMD-SHELL", "pg_isready -U app -d appdb"]
      interval: 500ms
      timeout: 5s
      retries: 120
  cache:
    image: redis:7
    healthcheck:
      test: ["CMD", "redis-cli", "ping"]
      interval: 500ms
      retries: 60
  step:
    depends_on: [db, cache]
    environment:
      DATABASE_URL: postgresql://app:s3cret-pw@db:5432/appdb
      REDIS_HOST: cache
"""

# The step is what a CI job's tests would do: real client libraries, over the network.
CLIENT = """\
import os, psycopg, redis
with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
    conn.execute("CREATE TABLE t (n int)")
    conn.execute("INSERT INTO t VALUES (41), (1)")
    total = conn.execute("SELECT sum(n) FROM t").fetchone()[0]
    version = conn.info.server_version // 10000
r = redis.Redis(host=os.environ["REDIS_HOST"], port=6379)
r.set("answer", total)
print("postgres", version, "sum", total)
print("redis", r.get("answer").decode(), r.info()["redis_version"])
"""


@pytest.fixture(autouse=True)
def _shared_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    monkeypatch.setenv("PATCHHEAL_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ph-cache"))
    monkeypatch.delenv(services.ENV_OVERRIDE, raising=False)


@pytest.mark.docker
@pytest.mark.slow
def test_unmodified_compose_file_with_postgres_and_redis_runs_offline(
    engine: Any, python_image: str, tmp_path: Path
) -> None:
    """`image: postgres:16` and `image: redis:7` with no registry: served by images built
    from Debian's packages, healthy before the step, reachable by real clients, torn down."""
    tree = tmp_path / "wt"
    tree.mkdir()
    (tree / "compose.yaml").write_text(COMPOSE)
    (tree / "check_services.py").write_text(CLIENT)
    for ref in ("postgres:16", "redis:7"):
        assert not any(ref in tag for image in engine.images.list() for tag in image.tags)
    job_id = f"services-{os.getpid()}"
    said: list[str] = []
    harness = ComposeHarness(
        load_harness("compose"),
        job_id=job_id,
        # async-timeout by name: the host wheelhouse evaluates redis's marker
        # (python_full_version < 3.11.3) for the host's Python, not Debian's 3.11.2.
        setup=["pip install 'psycopg[binary]' redis async-timeout"],
        say=said.append,
    )
    try:
        harness.prepare(tree)
        result = harness.run("python check_services.py", tree, timeout=300, idle_timeout=240)
    finally:
        harness.close()
    assert result.exit_code == 0, result.output
    assert "postgres 15" in result.output
    assert "sum 42\nredis 42 7.0" in result.output
    assert any("postgres:16" in m and "not 16" in m for m in said), said
    assert labelled(engine, job_id) == {"containers": [], "networks": [], "volumes": []}


@pytest.mark.docker
@pytest.mark.slow
def test_postgres_service_refuses_to_start_without_a_password(
    engine: Any, python_image: str, tmp_path: Path
) -> None:
    """The official image's contract: no POSTGRES_PASSWORD (and no trust) is an error
    that names the variable, not a database anyone can log into."""
    from patchheal.errors import HarnessError

    tree = tmp_path / "wt"
    tree.mkdir()
    (tree / "compose.yaml").write_text(
        "services:\n  db:\n    image: postgres:15\n"
        "    healthcheck: {test: 'pg_isready', interval: 200ms}\n"
    )
    job_id = f"services-nopw-{os.getpid()}"
    harness = ComposeHarness(load_harness("compose"), job_id=job_id)
    try:
        with pytest.raises(HarnessError, match="POSTGRES_PASSWORD is not set"):
            harness.run("true", tree, timeout=120, idle_timeout=120)
    finally:
        harness.close()
    assert labelled(engine, job_id) == {"containers": [], "networks": [], "volumes": []}


@pytest.mark.docker
def test_an_unmapped_image_names_the_ways_out(engine: Any, tmp_path: Path) -> None:
    tree = tmp_path / "wt"
    tree.mkdir()
    (tree / "compose.yaml").write_text("services:\n  q:\n    image: rabbitmq:3\n")
    harness = ComposeHarness(load_harness("compose"), job_id=f"services-unmapped-{os.getpid()}")
    try:
        with pytest.raises(ImageBuildError, match=r"rabbitmq:3.*known: .*postgres.*docker load"):
            harness.run("true", tree, timeout=60, idle_timeout=60)
    finally:
        harness.close()


@pytest.mark.parametrize(
    ("ref", "harness", "differs"),
    [
        ("postgres:16", "postgres", True),
        ("postgres:15-alpine", "postgres", False),
        ("docker.io/library/postgres:16@sha256:abcd", "postgres", True),
        ("postgres", "postgres", False),
        ("redis:7", "redis", False),
        ("redis:6.2-alpine", "redis", True),
        ("bitnami/redis:latest", "redis", False),
        ("postgis/postgis:16-3.4", "postgres", True),
    ],
)
def test_image_names_map_by_name_and_say_when_the_version_differs(
    ref: str, harness: str, differs: bool
) -> None:
    found = services.lookup(ref)
    assert found is not None
    assert found.harness == harness
    assert ("from Debian, not" in found.note) is differs


@pytest.mark.parametrize(
    "ref", ["rabbitmq:3", "myregistry.example:5000/postgres-tools:1", "postgresql:16"]
)
def test_other_images_are_not_mapped(ref: str) -> None:
    assert services.lookup(ref) is None


def test_mapping_is_overridable_by_harness_and_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    configured = {"ghcr.io/acme/*": "redis", "ghcr.io/acme/pg*": "postgres"}
    found = services.lookup("ghcr.io/acme/pg-ci:2", configured)
    assert found is not None
    assert (found.harness, found.pattern) == ("postgres", "ghcr.io/acme/pg*")
    found = services.lookup("ghcr.io/acme/cache:1", configured)
    assert found is not None
    assert found.harness == "redis"
    monkeypatch.setenv(services.ENV_OVERRIDE, "postgres=none, redis = my-redis")
    assert services.lookup("postgres:16") is None
    found = services.lookup("redis:7")
    assert found is not None
    assert found.harness == "my-redis"
    monkeypatch.setenv(services.ENV_OVERRIDE, "postgres")
    with pytest.raises(SpecError, match="IMAGE=HARNESS"):
        services.lookup("postgres:16")


def test_bundled_service_definitions_load() -> None:
    for name in ("postgres", "redis"):
        defn = load_harness(name)
        assert defn.image.packages
        assert defn.dockerfile_path is not None
