"""deploy/helm/values.yaml parses as YAML and agrees with deploy/dagster.yaml and deploy/Dockerfile on what
the two deployments share: the K8s run launcher, the queue and its per-account tag limit, the Postgres
password Secret, DAGSTER_HOME and the code server (module, port). A consistency check, not a validation
against the chart's values.schema.json (see deploy/README.md, "What is validated here")."""

from __future__ import annotations

import json
import tomllib

from tests.support.deploy import (
    HELM_VALUES,
    INSTANCE_YAML,
    ROOT,
    RUN_TAG_LIMITS,
    dockerfile_instructions,
    env_values,
    load_yaml,
)


def _names(entries: list[dict]) -> list[str]:
    return [entry["name"] for entry in entries]


def test_the_values_parse_and_target_the_chart_of_the_locked_dagster():
    """The values are a YAML mapping, and the chart version they document is the locked dagster's."""
    values = load_yaml(HELM_VALUES)
    assert isinstance(values, dict)
    dagster_pin = next(d for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
                       if d.startswith("dagster=="))  # fmt: skip
    assert f"--version {dagster_pin.split('==')[1]}" in HELM_VALUES.read_text()


def test_the_queue_limits_agree_with_the_instance():
    """Both run the QueuedRunCoordinator with the same limits: one run in progress per distinct value of
    `dagster/partition` and of `ocean_tracking/account`, the same overall maximum, the same pool default and
    dequeue interval."""
    values, instance = load_yaml(HELM_VALUES), load_yaml(INSTANCE_YAML)
    coordinator = values["dagsterDaemon"]["runCoordinator"]
    assert coordinator["enabled"] and coordinator["type"] == instance["run_coordinator"]["class"] == "QueuedRunCoordinator"
    queued = coordinator["config"]["queuedRunCoordinator"]
    assert queued["dequeueIntervalSeconds"] == instance["run_coordinator"]["config"]["dequeue_interval_seconds"]
    # the chart refuses the limits in both places; they live under `concurrency`, as in the instance
    assert "tagConcurrencyLimits" not in queued and "maxConcurrentRuns" not in queued
    concurrency = values["concurrency"]
    assert concurrency["enabled"]
    assert instance["concurrency"]["runs"]["tag_concurrency_limits"] == RUN_TAG_LIMITS
    assert concurrency["runs"]["tagConcurrencyLimits"] == RUN_TAG_LIMITS
    assert concurrency["runs"]["maxConcurrentRuns"] == instance["concurrency"]["runs"]["max_concurrent_runs"]
    assert concurrency["pools"]["defaultLimit"] == instance["concurrency"]["pools"]["default_limit"]
    daemon = values["dagsterDaemon"]
    assert daemon["runRetries"] == {"enabled": True, "maxRetries": instance["run_retries"]["max_retries"]}
    assert daemon["runMonitoring"]["enabled"] == instance["run_monitoring"]["enabled"]
    assert values["telemetry"]["enabled"] is False is instance["telemetry"]["enabled"]


def test_the_launcher_agrees_with_the_instance():
    """Both launch runs with the K8sRunLauncher in the same namespace, pull policy, ConfigMaps, labels and
    resources; the Secrets the instance's launcher names are the chart's launcher Secrets plus the code
    location's (which the chart passes on to its runs)."""
    values, instance = load_yaml(HELM_VALUES), load_yaml(INSTANCE_YAML)
    launcher = instance["run_launcher"]["config"]
    assert values["runLauncher"]["type"] == instance["run_launcher"]["class"] == "K8sRunLauncher"
    helm = values["runLauncher"]["config"]["k8sRunLauncher"]
    assert helm["jobNamespace"] == launcher["job_namespace"]
    assert helm["imagePullPolicy"] == launcher["image_pull_policy"]
    assert helm["loadInclusterConfig"] == launcher["load_incluster_config"]
    assert helm["failPodOnRunFailure"] == launcher["fail_pod_on_run_failure"]
    assert helm["labels"] == launcher["labels"] and helm["resources"] == launcher["resources"]
    assert _names(helm["envConfigMaps"]) == launcher["env_config_maps"]
    (location,) = values["dagster-user-deployments"]["deployments"]
    assert location["includeConfigInLaunchedRuns"]["enabled"]
    assert set(_names(helm["envSecrets"])) | set(_names(location["envSecrets"])) == set(launcher["env_secrets"])
    assert values["global"]["postgresqlSecretName"] == launcher["postgres_password_secret"]
    assert values["global"]["serviceAccountName"] == launcher["service_account_name"]
    assert values["global"]["dagsterHome"] == launcher["dagster_home"]


def test_the_code_location_serves_the_image_and_no_password_is_embedded():
    """The user deployment serves the Dockerfile's module on its exposed port, from the image the README
    builds, with DAGSTER_HOME where the image sets it; the Postgres password only comes from the Secret
    (no generated Secret, no value), with psycopg2 named as in the instance."""
    values, instance = load_yaml(HELM_VALUES), load_yaml(INSTANCE_YAML)
    instructions = dockerfile_instructions()
    cmd = json.loads([i.arguments for i in instructions if i.keyword == "CMD"][-1])
    (location,) = values["dagster-user-deployments"]["deployments"]
    assert location["dagsterApiGrpcArgs"] == ["-m", cmd[cmd.index("-m") + 1]]
    assert str(location["port"]) == cmd[cmd.index("-p") + 1] == next(i.arguments for i in instructions if i.keyword == "EXPOSE")
    assert location["image"]["repository"] in (ROOT / "deploy" / "README.md").read_text()
    assert values["global"]["dagsterHome"] == env_values(instructions)["DAGSTER_HOME"]
    postgres = values["postgresql"]
    assert postgres["enabled"] is False and values["generatePostgresqlPasswordSecret"] is False
    assert postgres["postgresqlPassword"] == ""
    assert postgres["postgresqlScheme"] == instance["storage"]["postgres"]["postgres_db"]["scheme"]
    assert all("value" not in entry for entry in location.get("env", []))  # settings come from ConfigMaps/Secrets
