"""Several accounts in one Dagster deployment, as partitions (`assets.accounts`): the code location loaded with
OCEAN_TRACKING_ACCOUNTS=emea,apac and each account's own key, materialized through Dagster against a real sandbox
over HTTP that serves the two keys as two independent accounts.

The code location reads OCEAN_TRACKING_ACCOUNTS when it is imported, so this module imports a fresh copy of the
`assets` package with the variables set (`fresh_code_location`) and puts the suite's own copy back afterwards;
the load itself, and a bad value, are checked in a fresh process, as Dagster loads it."""

from __future__ import annotations

import contextlib
import importlib
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import dagster as dg
import pytest
import yaml
from dagster._core.instance.ref import InstanceRef
from dagster._utils.tags import TagConcurrencyLimitsCounter

from pipelines.journals import NotificationJournal
from pipelines.settings import Account, webhook_journal_path
from tests.support.import_probe import IMPORT_PROBE
from tests.support.lakes import lake_in
from tests.support.notifications import body, notification
from tests.support.sandboxes import FROZEN_WORLD, FULL_KEY, REPO, api_total, sandbox_server
from tests.support.syncs import WAREHOUSE_ENV

OTHER_ACCOUNT_KEY = "sbx_test_partitions_other_5e1f09"  # the sandbox's second account
WRONG_KEY = "sbx_test_partitions_unknown_77c2d4"  # a well-formed key the sandbox rejects (401)
KEYS = {"emea": FULL_KEY, "apac": OTHER_ACCOUNT_KEY}
ACCOUNTS = {"OCEAN_TRACKING_ACCOUNTS": "emea,apac",
            "SOURCES__OCEAN_TRACKING__ACCOUNTS__EMEA__API_KEY": FULL_KEY,
            "SOURCES__OCEAN_TRACKING__ACCOUNTS__APAC__API_KEY": OTHER_ACCOUNT_KEY}
ACCOUNT_TAG = "ocean_tracking/account"
PARTITION_TAG = "dagster/partition"
TICK = datetime(2026, 11, 2, 2, 0, tzinfo=UTC)


def repository(code) -> dg.RepositoryDefinition:
    """The code location's repository: a tick requesting partitioned runs resolves them against it."""
    return code.definitions.defs.get_repository_def()


def sensor_context(code, instance: dg.DagsterInstance, **kwargs) -> dg.SensorEvaluationContext:
    return dg.build_sensor_context(instance=instance, repository_def=repository(code), **kwargs)


@pytest.fixture(scope="module")
def server():
    """One sandbox for the module, its clock frozen, serving FULL_KEY's account and a second account to
    OTHER_ACCOUNT_KEY (own shipments, own rate budget)."""
    with sandbox_server(**FROZEN_WORLD, account_keys=[(OTHER_ACCOUNT_KEY,)]) as sandbox:
        yield sandbox


@contextlib.contextmanager
def fresh_code_location():
    """`assets` imported afresh (it reads OCEAN_TRACKING_ACCOUNTS at import), its modules handed out by short
    name; the suite's own `assets` modules are put back afterwards, so other test modules keep theirs."""
    ours = {name: module for name, module in sys.modules.items() if name == "assets" or name.startswith("assets.")}
    for name in ours:
        del sys.modules[name]
    try:
        importlib.import_module("assets.definitions")
        yield SimpleNamespace(**{name.split(".")[-1]: module for name, module in sys.modules.items()
                                 if name.startswith("assets.")})  # fmt: skip
    finally:
        for name in [name for name in sys.modules if name == "assets" or name.startswith("assets.")]:
            del sys.modules[name]
        sys.modules.update(ours)


@pytest.fixture(scope="module")
def code(server, tmp_path_factory):
    """The code location with the accounts emea and apac, its environment set for the module (the keys, the
    sandbox, a data folder and limiter of its own; no shared key, no warehouse settings)."""
    workdir = tmp_path_factory.mktemp("accounts")
    with pytest.MonkeyPatch.context() as patch:
        for name in (*WAREHOUSE_ENV, "SOURCES__OCEAN_TRACKING__API_KEY"):
            patch.delenv(name, raising=False)
        for name, value in {**ACCOUNTS,
                            "SOURCES__OCEAN_TRACKING__BASE_URL": server.base_url,
                            "SOURCES__OCEAN_TRACKING__APP_URL": server.app_url,
                            "SOURCES__OCEAN_TRACKING__RATE_WINDOW_SECONDS": "0.05",
                            "SOURCES__OCEAN_TRACKING__LIMITER_PATH": str(workdir / "limiter.sqlite"),
                            "OCEAN_TRACKING_DATA_DIR": str(workdir / "data")}.items():  # fmt: skip
            patch.setenv(name, value)
        with fresh_code_location() as modules:
            modules.workdir = workdir
            yield modules


def ingest_config(include_maps: bool) -> dict:
    return {"ops": {"ocean_tracking_ingest": {"config": {"include_maps": include_maps}}}}


def all_assets(code) -> list:
    return [code.ingest.ocean_tracking_assets, *code.models.model_assets, *code.maps.map_assets, *code.checks.ingest_checks]


@pytest.fixture(scope="module")
def loaded(code):
    """Each account materialized through Dagster into one lake: every ingest table and its checks, the
    models `deep_links` and upstream, and the GeoParquet; emea with its route maps (and their overview)."""
    selection = {
        "emea": (dg.AssetSelection.groups("ingest") | dg.AssetSelection.assets(["analytics", "deep_links"]).upstream()
                 | dg.AssetSelection.assets(["maps", "map_features_geoparquet"], ["maps", "routes_overview"])),
        "apac": (dg.AssetSelection.groups("ingest") | dg.AssetSelection.assets(["analytics", "deep_links"]).upstream()
                 | dg.AssetSelection.assets(["maps", "map_features_geoparquet"])),
    }  # fmt: skip
    with dg.instance_for_test() as instance:
        runs = {
            account: dg.materialize(
                all_assets(code), selection=selection[account], partition_key=account, instance=instance,
                resources=code.definitions.build_resources(), run_config=ingest_config(account == "emea"),
            )
            for account in ("emea", "apac")
        }  # fmt: skip
        yield SimpleNamespace(runs=runs, instance=instance, data_dir=code.workdir / "data")


def stored_events(instance: dg.DagsterInstance) -> str:
    """Every event and every run tag of every run of the instance, as text."""
    records = instance.get_run_records()
    texts = [str(event) for record in records for event in instance.all_logs(record.dagster_run.run_id)]
    return "\n".join(texts + [json.dumps(record.dagster_run.tags) for record in records])


# ---- loading the code location ------------------------------------------------------------------------

LOAD_REPORT = IMPORT_PROBE + r"""
import dagster as dg
defs = assets.definitions.defs
dg.Definitions.validate_loadable(defs)
graph = defs.resolve_asset_graph()
keys = graph.get_all_asset_keys()
print(json.dumps({
    "partitions": {key.to_user_string(): graph.get(key).partitions_def.get_partition_keys()
                   if graph.get(key).partitions_def else None for key in keys},
    "jobs": {job.name: defs.resolve_job_def(job.name).partitions_def is not None for job in defs.jobs},
    "checks_partitioned": all(spec.partitions_def is not None for checks in defs.asset_checks for spec in checks.check_specs),
    "api_key": defs.resources["ocean_tracking_api"].api_key,
}))
"""


def _load(env: dict[str, str], workdir: Path) -> subprocess.CompletedProcess:
    """`import assets.definitions` in a fresh process, as Dagster loads the code location, with `env`."""
    return subprocess.run(
        [sys.executable, "-c", LOAD_REPORT], cwd=workdir, capture_output=True, text=True, timeout=180, check=False,
        env={"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(REPO), "HOME": str(workdir),
             "DAGSTER_HOME": str(workdir), "OCEAN_TRACKING_DATA_DIR": str(workdir / "data"),
             "PYTHONDONTWRITEBYTECODE": "1", **env},
    )  # fmt: skip


@pytest.mark.slow
def test_the_code_location_loads_partitioned_by_account_and_touches_nothing(tmp_path):
    (tmp_path / "work").mkdir()
    result = _load({"OCEAN_TRACKING_ACCOUNTS": "emea,apac"}, tmp_path / "work")  # no key at all: none is needed to load

    assert result.returncode == 0, result.stderr
    probe, report = (json.loads(line) for line in result.stdout.strip().splitlines()[-2:])
    assert probe["events"] == [] and list((tmp_path / "work").iterdir()) == []
    assert probe["heavy"] == [], "loading imports none of dlt, geopandas, pandas, pyarrow, matplotlib"
    partitions = report["partitions"]
    assert partitions.pop("ocean_tracking/lake_maintenance") is None, "one lake: its maintenance is not an account's"
    assert set(map(tuple, partitions.values())) == {("emea", "apac")}
    # the keys are the one-account keys: ingest tables, models, maps
    assert {"ocean_tracking/shipments", "analytics/container_status", "maps/route_maps"} <= set(partitions)
    assert report["jobs"] == {"full_sync": True, "refresh_tracking_and_maps": True,
                              "load_resolved_tracking_requests": True, "apply_webhook_notifications": True,
                              "refresh_route_maps": True, "lake_maintenance": False,
                              "create_tracking_requests_job": False, "patch_ref_numbers_job": False,
                              "upload_documents_job": False}  # fmt: skip
    assert report["checks_partitioned"]
    assert report["api_key"] is None, "no shared key with accounts: each account's is read by its runs"


def test_a_bad_account_list_fails_loading_in_one_line(tmp_path):
    result = _load({"OCEAN_TRACKING_ACCOUNTS": "emea,EMEA"}, tmp_path)

    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("pipelines.errors.ConfigurationError: OCEAN_TRACKING_ACCOUNTS names an account"), last


# ---- materializing partitions --------------------------------------------------------------------------


@pytest.mark.slow
def test_each_account_lands_in_its_own_dataset_models_and_files(loaded, server):
    assert all(run.success for run in loaded.runs.values())
    store = lake_in(loaded.data_dir)
    with store.connect(read_only=True) as con:
        rows = {account: con.execute(f"select count(*) from ocean_tracking_{account}.shipments").fetchone()[0]
                for account in KEYS}
        modelled = {account: con.execute(f"select count(*) from _analytics_{account}_staging.stg_shipments").fetchone()[0]
                    for account in KEYS}
        links = {account: con.execute(f"select count(*) from analytics_{account}.deep_links").fetchone()[0]
                 for account in KEYS}
        schemas = {row[0] for row in con.execute("select schema_name from information_schema.schemata").fetchall()}
    served = {account: api_total(server, "/shipments", key=key) for account, key in KEYS.items()}
    assert rows == modelled == served and served["emea"] != served["apac"], "each account's own shipments"
    assert all(links.values())
    assert not {"ocean_tracking", "analytics"} & schemas, "no account fell back to the one-account schemas"

    for account, run in loaded.runs.items():
        materialized = {event.asset_key: event.materialization.metadata for event in run.get_asset_materialization_events()}
        assert materialized[dg.AssetKey(["ocean_tracking", "shipments"])]["dagster/table_name"].value == \
            f"ocean_tracking_{account}.shipments"
        assert materialized[dg.AssetKey(["ocean_tracking", "shipments"])]["dagster/row_count"].value == served[account]
        assert materialized[dg.AssetKey(["analytics", "stg_shipments"])]["dagster/row_count"].value == served[account]
        geoparquet = materialized[dg.AssetKey(["maps", "map_features_geoparquet"])]["path"].value
        assert Path(geoparquet) == loaded.data_dir / f"map_features_{account}.parquet"
        # every check ran on the account's own tables, recorded for its partition
        checks = run.get_asset_check_evaluations()
        assert checks and {check.partition for check in checks} == {account}
        failed = [f"{c.asset_key.to_user_string()}:{c.check_name}" for c in checks
                  if not c.passed and c.severity == dg.AssetCheckSeverity.ERROR]  # WARN: a table this run left out
        assert not failed
        tags = loaded.instance.get_run_by_id(run.run_id).tags
        assert tags[PARTITION_TAG] == account  # launched like the UI does: the partition tag is the account's
    assert (loaded.data_dir / "map_features_emea.parquet").is_file()  # apac loaded no maps: nothing to write
    assert (loaded.data_dir / "maps_emea" / "overview.png").is_file()
    assert not (loaded.data_dir / "maps").exists() and not (loaded.data_dir / "map_features.parquet").exists()


@pytest.mark.slow
def test_no_key_reaches_an_event_a_log_or_a_tag(loaded):
    stored = stored_events(loaded.instance)
    assert "ocean_tracking_apac" in stored  # the text scanned is the runs' own
    assert FULL_KEY not in stored and OTHER_ACCOUNT_KEY not in stored


@pytest.mark.slow
def test_an_account_with_a_wrong_key_fails_alone(code, server, monkeypatch, dagster_instance, tmp_path):
    monkeypatch.setenv("SOURCES__OCEAN_TRACKING__ACCOUNTS__APAC__API_KEY", WRONG_KEY)
    selection = dg.AssetSelection.assets(["ocean_tracking", "tracking_requests"])

    runs = {account: dg.materialize(all_assets(code), selection=selection, partition_key=account,
                                    instance=dagster_instance, resources=code.definitions.build_resources(),
                                    raise_on_error=False)
            for account in ("apac", "emea")}  # fmt: skip

    assert not runs["apac"].success and runs["emea"].success
    failure = next(e for e in runs["apac"].all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE)
    message = failure.step_failure_data.error.to_string()
    assert "HTTP 401" in message and "The API key was rejected" in message, message
    with lake_in(tmp_path / "data").connect(read_only=True) as con:
        loaded = con.execute("select count(*) from ocean_tracking_emea.tracking_requests").fetchone()[0]
    assert loaded == api_total(server, "/tracking_requests", key=FULL_KEY)
    stored = stored_events(dagster_instance)
    assert WRONG_KEY not in stored and FULL_KEY not in stored


# ---- schedules and sensors: one run request per account ----------------------------------------------------


def _by_account(requests: list[dg.RunRequest]) -> dict[str, dg.RunRequest]:
    for request in requests:
        assert request.tags[ACCOUNT_TAG] == request.partition_key
        assert request.run_key.startswith(f"{request.partition_key}-")
    return {request.partition_key: request for request in requests}


def test_the_full_sync_schedule_requests_one_run_per_account(code):
    tick = code.schedules.full_sync_schedule.evaluate_tick(dg.build_schedule_context(scheduled_execution_time=TICK,
                                                                                   repository_def=repository(code)))

    assert set(_by_account(tick.run_requests)) == {"emea", "apac"}
    assert code.schedules.full_sync_schedule.cron_schedule == "0 2 * * *"


@pytest.mark.slow
def test_the_refresh_schedule_plans_each_account_on_its_own(code, loaded):
    store = lake_in(loaded.data_dir)
    warehouse = code.resources.Warehouse(destination="ducklake", catalog=store.catalog, data_path=store.data_path)
    context = dg.build_schedule_context(scheduled_execution_time=TICK.replace(hour=0, minute=15),
                                        resources={"warehouse": warehouse}, repository_def=repository(code))
    assert set(_by_account(code.schedules.refresh_schedule.evaluate_tick(context).run_requests)) == {"emea", "apac"}

    with NotificationJournal(webhook_journal_path(Account("emea"))) as journal:  # emea's receiver is alive
        journal.beat("http://127.0.0.1:1/webhooks", 1)
    assert set(_by_account(code.schedules.refresh_schedule.evaluate_tick(context).run_requests)) == {"apac"}


def test_the_notification_sensor_serves_each_accounts_journal(code, dagster_instance):
    sensor = code.webhooks.webhook_notifications_sensor
    for account in ("emea", "apac"):
        with NotificationJournal(webhook_journal_path(Account(account))) as journal:
            journal.record(body(notification(f"n-{account}")))

    requests = _by_account(sensor.evaluate_tick(sensor_context(code, dagster_instance)).run_requests)
    assert {account: request.run_key for account, request in requests.items()} == {
        "emea": "emea-notifications-n-emea", "apac": "apac-notifications-n-apac"}

    # emea's refresh is running (a run of its partition, however launched): only apac's is requested
    dagster_instance.add_run(dg.DagsterRun(job_name="apply_webhook_notifications", run_id="emea-refresh",
                                           status=dg.DagsterRunStatus.STARTED, tags={PARTITION_TAG: "emea"}))
    tick = sensor.evaluate_tick(sensor_context(code, dagster_instance))
    assert set(_by_account(tick.run_requests)) == {"apac"}


def test_the_map_sensor_gives_each_live_account_its_own_budget(code, dagster_instance):
    with NotificationJournal(webhook_journal_path(Account("apac"))) as journal:
        journal.beat("http://127.0.0.1:1/webhooks", 1)
    # emea spent its hour; apac's budget is its own
    dagster_instance.add_run(dg.DagsterRun(job_name="full_sync", run_id="emea-spent",
                                           tags={PARTITION_TAG: "emea", "ocean_tracking/api_requests": "4000"}))

    tick = code.webhooks.route_map_freshness_sensor.evaluate_tick(sensor_context(code, dagster_instance))

    (request,) = tick.run_requests
    assert _by_account([request]) == {"apac": request}
    assert request.run_config["ops"]["ocean_tracking_ingest"]["config"] == {"mode": "maps", "map_budget": 1200}


def _pending_lake(code, data_dir: Path, accounts: tuple[str, ...]):
    """A lake where each of `accounts` loaded one tracking request as pending that its service never had."""
    store = lake_in(data_dir)
    warehouse = code.resources.Warehouse(destination="ducklake", catalog=store.catalog, data_path=store.data_path)
    with warehouse.writing(), warehouse.connect() as con:
        for account in accounts:
            con.execute(f"create schema ocean_tracking_{account}")
            con.execute(f"create table ocean_tracking_{account}.tracking_requests as "
                        f"select 'tr-{account}-gone' as id, 'pending' as status")
    return warehouse


@pytest.mark.slow
def test_the_pending_sensor_follows_each_account_and_one_accounts_error_spares_the_other(
    code, server, dagster_instance, monkeypatch, tmp_path
):
    warehouse = _pending_lake(code, tmp_path / "lake", ("emea", "apac"))
    api = code.resources.OceanTrackingApi(api_key=None, base_url=server.base_url, app_url=server.app_url,
                                          rate_window_seconds=0.05)
    resources = {"warehouse": warehouse, "ocean_tracking_api": api}
    sensor = code.sensors.pending_tracking_requests_sensor

    context = sensor_context(code, dagster_instance, resources=resources)
    first = sensor.evaluate_tick(context)
    assert set(_by_account(first.run_requests)) == {"emea", "apac"}
    digests = json.loads(first.cursor)
    assert set(digests) == {"emea", "apac"}

    # the same state again: nothing new for either account
    again = sensor.evaluate_tick(sensor_context(code, dagster_instance, resources=resources, cursor=first.cursor))
    assert not again.run_requests and "emea:" in again.skip_message and "apac:" in again.skip_message

    # apac's key is refused: its error is logged, emea is still followed
    monkeypatch.setenv("SOURCES__OCEAN_TRACKING__ACCOUNTS__APAC__API_KEY", WRONG_KEY)
    tick = sensor.evaluate_tick(sensor_context(code, dagster_instance, resources=resources))
    assert set(_by_account(tick.run_requests)) == {"emea"}
    assert set(json.loads(tick.cursor)) == {"emea"}


# ---- one run per account in the queue ----------------------------------------------------------------------


def test_the_queue_runs_one_run_per_account_however_the_run_was_launched(code, tmp_path, monkeypatch):
    """The root dagster.yaml limits `dagster/partition` and `ocean_tracking/account` to one run in progress per
    value. Every run of a partitioned job carries the partition tag, launched from the launchpad or a backfill
    (the job's partition tags) as much as from a schedule: a second run of emea waits, apac's does not."""
    config = (REPO / "dagster.yaml").read_text()
    (tmp_path / "dagster.yaml").write_text(config)
    assert yaml.safe_load(config)["concurrency"]["pools"]["default_limit"] == 1  # one host's default kept
    monkeypatch.chdir(tmp_path)
    full_sync = code.definitions.defs.resolve_job_def("full_sync")
    launched = {account: full_sync.get_tags_for_partition_key(account, selected_asset_keys=None) for account in ("emea", "apac")}
    assert launched["emea"][PARTITION_TAG] == "emea" and ACCOUNT_TAG not in launched["emea"]

    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(tmp_path))) as instance:
        limits = instance.get_concurrency_config().run_queue_config.tag_concurrency_limits
        assert {limit["key"] for limit in limits} == {PARTITION_TAG, ACCOUNT_TAG}
        running = instance.add_run(dg.DagsterRun(job_name="full_sync", run_id="emea-scheduled", status=dg.DagsterRunStatus.STARTED,
                                                 tags={**launched["emea"], ACCOUNT_TAG: "emea"}))  # fmt: skip
        counter = TagConcurrencyLimitsCounter(limits, [running])
        assert counter.is_blocked(dg.DagsterRun(job_name="full_sync", run_id="emea-from-ui", tags=launched["emea"]))
        assert not counter.is_blocked(dg.DagsterRun(job_name="full_sync", run_id="apac-from-ui", tags=launched["apac"]))
        assert not counter.is_blocked(dg.DagsterRun(job_name="lake_maintenance", run_id="maintenance", tags={}))


# ---- write-back ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_write_back_job_writes_with_the_account_its_config_names(code, server, tmp_path, dagster_instance):
    batch = tmp_path / "tr.csv"
    batch.write_text("request_number,request_type,scac,ref_numbers\nWBACCT001,bill_of_lading,MAEU,\n")
    job = code.definitions.defs.resolve_job_def("create_tracking_requests_job")
    before = {account: api_total(server, "/tracking_requests", key=key) for account, key in KEYS.items()}

    def run(account: str) -> dg.ExecuteInProcessResult:
        config = {"ops": {"create_tracking_requests_op": {"config": {"source_path": str(batch), "account": account}}}}
        return job.execute_in_process(run_config=config, instance=dagster_instance, raise_on_error=False)

    unsaid = run("")
    assert not unsaid.success
    failure = next(e for e in unsaid.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE)
    assert "Say which account in the op config `account`: one of emea, apac." in failure.step_failure_data.error.message

    assert run("apac").success
    after = {account: api_total(server, "/tracking_requests", key=key) for account, key in KEYS.items()}
    assert after == {"emea": before["emea"], "apac": before["apac"] + 1}
    assert OTHER_ACCOUNT_KEY not in stored_events(dagster_instance)
