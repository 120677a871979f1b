"""deploy/dagster.yaml, the production instance, loads as a real DagsterInstance against a REAL PostgreSQL
(tests/support/postgres.py) with its DAGSTER_PG_* variables: runs and events land in PostgreSQL and a
second instance sees them; the queue the daemon reads keeps one run per account in progress and lets
other accounts through, by the account tag and by Dagster's partition tag (Dagster's own tag-limit counter
over runs stored in PostgreSQL).

The K8sRunLauncher cannot be constructed outside a cluster (it loads the in-cluster Kubernetes config), so
the instance is loaded without its `run_launcher` block, and that block's config is validated on its own
against `K8sRunLauncher.config_type()` with dagster's config processing (`process_config`), env vars set."""

from __future__ import annotations

import contextlib
import importlib

import dagster as dg
import pytest
import yaml
from dagster._config import process_config
from dagster._core.instance import DagsterInstance
from dagster._core.remote_origin import GrpcServerCodeLocationOrigin, RemoteJobOrigin, RemoteRepositoryOrigin
from dagster._core.run_coordinator import QueuedRunCoordinator
from dagster._core.storage.dagster_run import DagsterRun, DagsterRunStatus, RunsFilter
from dagster._core.utils import make_new_run_id
from dagster._utils.tags import TagConcurrencyLimitsCounter
from dagster_k8s import K8sRunLauncher

from tests.support.deploy import (
    ACCOUNT_TAG,
    INSTANCE_YAML,
    PARTITION_TAG,
    RUN_TAG_LIMITS,
    dockerfile_instructions,
    env_values,
    load_yaml,
)

JOB_IMAGE = "registry.example.com/ocean-tracking-elt:test"


@pytest.fixture
def instance_home(tmp_path, monkeypatch, postgres_server, postgres_database):
    """A DAGSTER_HOME holding deploy/dagster.yaml without its run_launcher block, and the DAGSTER_PG_*
    variables pointing at a fresh database of the real test server."""
    config = load_yaml(INSTANCE_YAML)
    assert config.pop("run_launcher")["class"] == "K8sRunLauncher"
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    monkeypatch.setenv("DAGSTER_PG_HOST", postgres_server.host)
    monkeypatch.setenv("DAGSTER_PG_PORT", str(postgres_server.port))
    monkeypatch.setenv("DAGSTER_PG_USERNAME", "postgres")
    monkeypatch.setenv("DAGSTER_PG_PASSWORD", postgres_server.password)
    monkeypatch.setenv("DAGSTER_PG_DB", postgres_database.name)
    return tmp_path


@contextlib.contextmanager
def open_instance(home):
    """A DagsterInstance made from the dagster.yaml in `home`, disposed afterwards."""
    instance = DagsterInstance.from_config(str(home))
    try:
        yield instance
    finally:
        instance.dispose()


@dg.op
def touch() -> int:
    return 1


@dg.job
def tiny_sync():
    touch()


# Where a queued run comes from in the cluster: the code server of the Helm user deployment (port 4000).
ORIGIN = RemoteJobOrigin(
    repository_origin=RemoteRepositoryOrigin(
        code_location_origin=GrpcServerCodeLocationOrigin(host="ocean-tracking", port=4000, location_name="ocean_tracking"),
        repository_name="__repository__",
    ),
    job_name="full_sync",
)


def _run(instance: DagsterInstance, account: str, status: DagsterRunStatus, tag: str = ACCOUNT_TAG) -> DagsterRun:
    """A `full_sync` run of `account` (named by `tag`) stored in the instance with `status`, as the queue
    would hold it."""
    return instance.add_run(DagsterRun(job_name="full_sync", run_id=make_new_run_id(), status=status,
                                       tags={tag: account}, remote_job_origin=ORIGIN))  # fmt: skip


def test_runs_and_events_are_stored_in_postgresql_and_shared_between_instances(instance_home, postgres_database):
    """A job executed with the production instance leaves its run and events in the PostgreSQL database
    (Dagster's tables exist there, the run's row is in `runs`), and a second instance made from the same
    file reads the run, its tags and its success."""
    with open_instance(instance_home) as first:
        assert type(first.run_storage).__name__ == "PostgresRunStorage"
        assert type(first.event_log_storage).__name__ == "PostgresEventLogStorage"
        assert type(first.schedule_storage).__name__ == "PostgresScheduleStorage"
        result = tiny_sync.execute_in_process(instance=first, tags={ACCOUNT_TAG: "acme"})
        assert result.success
    tables = {row[0] for row in postgres_database.query("select tablename from pg_tables where schemaname = 'public'")}
    assert {"runs", "event_logs", "jobs", "job_ticks", "concurrency_limits"} <= tables
    assert postgres_database.query("select run_id from runs") == [(result.run_id,)]
    with open_instance(instance_home) as second:
        run = second.get_run_by_id(result.run_id)
        assert run is not None and run.status == DagsterRunStatus.SUCCESS
        assert run.tags[ACCOUNT_TAG] == "acme"
        assert any(event.dagster_event and event.dagster_event.is_successful_output
                   for event in second.all_logs(result.run_id))  # fmt: skip


@pytest.mark.parametrize("tag", [ACCOUNT_TAG, PARTITION_TAG])
def test_the_queue_keeps_one_run_per_account_and_lets_other_accounts_through(instance_home, tag):
    """The instance's run coordinator is the QueuedRunCoordinator, and the run-queue config the daemon reads
    (`get_concurrency_config().run_queue_config`) limits the tags `dagster/partition` (on every run of an
    account's partition, whoever launched it) and `ocean_tracking/account` to one run per distinct value.
    Applied by Dagster's own counter to runs stored in PostgreSQL, for either tag: with acme's run in
    progress, acme's queued run is blocked and globex's is not."""
    with open_instance(instance_home) as instance:
        assert isinstance(instance.run_coordinator, QueuedRunCoordinator)
        queue = instance.get_concurrency_config().run_queue_config
        assert queue.tag_concurrency_limits == RUN_TAG_LIMITS
        assert queue.max_concurrent_runs == 8
        assert instance.get_concurrency_config().pool_config.default_pool_limit == 8

        _run(instance, "acme", DagsterRunStatus.STARTED, tag)
        acme_waiting = _run(instance, "acme", DagsterRunStatus.QUEUED, tag)
        globex_waiting = _run(instance, "globex", DagsterRunStatus.QUEUED, tag)
    with open_instance(instance_home) as daemon_view:
        in_progress = daemon_view.get_runs(RunsFilter(statuses=[DagsterRunStatus.STARTED]))
        queued = {run.run_id: run for run in daemon_view.get_runs(RunsFilter(statuses=[DagsterRunStatus.QUEUED]))}
        counter = TagConcurrencyLimitsCounter(
            daemon_view.get_concurrency_config().run_queue_config.tag_concurrency_limits, list(in_progress)
        )
        assert counter.is_blocked(queued[acme_waiting.run_id])
        assert not counter.is_blocked(queued[globex_waiting.run_id])
        # once globex's run is launched, a second globex run waits behind it
        counter.update_counters_with_launched_item(queued[globex_waiting.run_id])
        assert counter.is_blocked(DagsterRun(job_name="full_sync", run_id=make_new_run_id(), tags={tag: "globex"}))


def test_retries_telemetry_and_logs_are_as_configured(instance_home):
    """Failed runs are retried twice (as on one host), telemetry is off, schedules are the daemon's, and
    compute logs are not kept on the (ephemeral) pod."""
    with open_instance(instance_home) as instance:
        assert instance.run_retries_enabled and instance.run_retries_max_retries == 2
        assert not instance.telemetry_enabled
        assert type(instance.scheduler).__name__ == "DagsterDaemonScheduler"
        assert type(instance.compute_log_manager).__name__ == "NoOpComputeLogManager"
        assert instance.run_monitoring_enabled


def _launcher_block() -> dict:
    return load_yaml(INSTANCE_YAML)["run_launcher"]


def test_the_k8s_run_launcher_config_is_valid_for_dagster_k8s(monkeypatch):
    """The run_launcher block names dagster_k8s's K8sRunLauncher, and its config passes that class's own
    schema with the environment set: the job image from DAGSTER_JOB_IMAGE, the instance ConfigMap, the
    image's DAGSTER_HOME, the Postgres password Secret and the env Secrets by name."""
    block = _launcher_block()
    assert getattr(importlib.import_module(block["module"]), block["class"]) is K8sRunLauncher
    monkeypatch.setenv("DAGSTER_JOB_IMAGE", JOB_IMAGE)
    result = process_config(K8sRunLauncher.config_type(), block["config"])
    assert result.success, [error.message for error in result.errors]
    config = result.value
    assert config["job_image"] == JOB_IMAGE
    assert config["instance_config_map"] and config["service_account_name"] and config["job_namespace"]
    assert config["postgres_password_secret"]
    assert config["dagster_home"] == env_values(dockerfile_instructions())["DAGSTER_HOME"]
    assert config["env_secrets"] and all("=" not in name for name in config["env_secrets"])  # names only


def test_the_launcher_validation_can_fail(monkeypatch):
    """The validation above is real: without DAGSTER_JOB_IMAGE in the environment, or without the required
    instance ConfigMap, or with a misspelt field, dagster rejects the config."""
    monkeypatch.delenv("DAGSTER_JOB_IMAGE", raising=False)
    config = _launcher_block()["config"]
    assert not process_config(K8sRunLauncher.config_type(), config).success
    monkeypatch.setenv("DAGSTER_JOB_IMAGE", JOB_IMAGE)
    without_map = {key: value for key, value in config.items() if key != "instance_config_map"}
    assert not process_config(K8sRunLauncher.config_type(), without_map).success
    assert not process_config(K8sRunLauncher.config_type(), {**config, "env_secret": ["x"]}).success
