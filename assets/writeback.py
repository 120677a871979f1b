"""Dagster ops and jobs for write-back: create tracking requests, patch ref_numbers, upload documents.

Each job is one op in the `ocean_tracking` pool (it spends the account's rate budget and publishes its
outcomes into the warehouse), using the `ocean_tracking_api` and `warehouse` resources, inside the
same `writeback_session` the CLI uses (the journal is its own SQLite file). Run config is typed: a source
(a CSV/manifest path, a folder for uploads, or a DuckDB table) and `dry_run`, which validates and
reports what would be sent without sending or recording anything. Every row's outcome is run metadata;
when a row did not succeed, the op fails with the counts as its message, as the CLI exits 1.

With several accounts (`assets.accounts`) the op config's `account` says whose key writes (required then);
empty is the single account. The account's batch has its own journal, looks numbers up in its dataset and
publishes into its own schema (`writeback_<account>`; see `pipelines.journals.writes`).
"""

from typing import Any

import dagster as dg

from assets.accounts import account_from_config
from assets.resources import OCEAN_TRACKING_POOL, OceanTrackingApi, Warehouse

# `pipelines.writeback` (and through it dlt's HTTP client) is imported inside the ops: loading the code
# location must cost little more than Dagster's own import.


class WritebackSource(dg.Config):
    """Where the rows come from: `source_path` (CSV file, manifest or folder) or `source_table`
    (`[schema.]table` in the warehouse); `dry_run` sends nothing; `allow_formulas` lets through values a
    spreadsheet would run as a formula (refused by default); `account`: whose key writes, one of
    OCEAN_TRACKING_ACCOUNTS (empty: the single account)."""

    source_path: str | None = None
    source_table: str | None = None
    dry_run: bool = False
    allow_formulas: bool = False
    account: str = ""

    def source(self) -> str:
        """The one configured source; exactly one of path or table must be set."""
        if bool(self.source_path) == bool(self.source_table):
            raise dg.Failure("set exactly one of source_path or source_table")
        return str(self.source_path or self.source_table)


class CreateTrackingRequestsConfig(WritebackSource):
    """Run config of `create_tracking_requests_job`."""


class PatchRefNumbersConfig(WritebackSource):
    """Run config of `patch_ref_numbers_job`: the numbers are added to each target's list; `replace` sets
    exactly the given list, and an empty list clears only with `replace` and `confirm_clear`."""

    replace: bool = False
    confirm_clear: bool = False


class UploadDocumentsConfig(WritebackSource):
    """Run config of `upload_documents_job` (source_path may be a folder)."""


def _finish(context: dg.OpExecutionContext, counts: dict[str, int], rows: list[dict[str, Any]],
            dry_run: bool, not_done: set[str]) -> dict[str, Any]:
    summary = ", ".join(f"{status} {count}" for status, count in sorted(counts.items())) or "nothing to do"
    metadata = {"counts": dg.MetadataValue.json(counts), "dry_run": dry_run,
                "rows": dg.MetadataValue.json(rows[:200])}
    if any(counts.get(status) for status in not_done):
        raise dg.Failure(description=f"{'dry run: ' if dry_run else ''}rows not done: {summary} (see `rows`)",
                         metadata=metadata, allow_retries=False)
    context.log.info(f"{'dry run: ' if dry_run else ''}{summary}")
    context.add_output_metadata(metadata)
    return {"counts": counts, "dry_run": dry_run, "rows": rows}


@dg.op(pool=OCEAN_TRACKING_POOL)
def create_tracking_requests_op(context: dg.OpExecutionContext, config: CreateTrackingRequestsConfig,
                                ocean_tracking_api: OceanTrackingApi, warehouse: Warehouse) -> dict:
    """Create the tracking requests of a CSV/table once each (see pipelines.writeback.tracking_requests)."""
    from pipelines.journals.writes import writeback_session
    from pipelines.writeback import TRACKING_REQUEST_COLUMNS, read_rows
    from pipelines.writeback.tracking_requests import NOT_DONE, create_tracking_requests

    account = account_from_config(config.account)
    with writeback_session(warehouse.store(), dry_run=config.dry_run, account=account) as (con, store), \
            ocean_tracking_api.client(account) as client:
        rows = read_rows(config.source(), con, columns=TRACKING_REQUEST_COLUMNS, allow_formulas=config.allow_formulas)
        report = create_tracking_requests(rows, client, store, dry_run=config.dry_run)
    rows = [{"row": r.row_index, "request_number": r.request_number, "status": r.status,
             "tracking_request_id": r.tracking_request_id, "errors": r.errors} for r in report.results]
    return _finish(context, report.counts, rows, config.dry_run, NOT_DONE)


@dg.op(pool=OCEAN_TRACKING_POOL)
def patch_ref_numbers_op(context: dg.OpExecutionContext, config: PatchRefNumbersConfig,
                         ocean_tracking_api: OceanTrackingApi, warehouse: Warehouse) -> dict:
    """Set ref_numbers on shipments/containers from a CSV/table (see pipelines.writeback.ref_numbers)."""
    from pipelines.journals.writes import writeback_session
    from pipelines.writeback import REF_NUMBER_COLUMNS, read_rows
    from pipelines.writeback.ref_numbers import patch_ref_numbers

    account = account_from_config(config.account)
    with writeback_session(warehouse.store(), dry_run=config.dry_run, account=account) as (con, store), \
            ocean_tracking_api.client(account) as client:
        rows = read_rows(config.source(), con, columns=REF_NUMBER_COLUMNS, allow_formulas=config.allow_formulas)
        report = patch_ref_numbers(rows, client, store, con, dry_run=config.dry_run, replace=config.replace,
                                   confirm_clear=config.confirm_clear, dataset=account.dataset_name)
    rows = [{"row": r.row_index, "kind": r.kind, "id": r.target_id, "ref_numbers": r.ref_numbers,
             "status": r.status, "errors": r.errors} for r in report.results]
    return _finish(context, report.counts, rows, config.dry_run, {"failed", "invalid"})


@dg.op(pool=OCEAN_TRACKING_POOL)
def upload_documents_op(context: dg.OpExecutionContext, config: UploadDocumentsConfig,
                        ocean_tracking_api: OceanTrackingApi, warehouse: Warehouse) -> dict:
    """Upload a folder or manifest of documents once each (see pipelines.writeback.documents)."""
    from pipelines.journals.writes import writeback_session
    from pipelines.writeback.documents import items_from_source, upload_documents

    account = account_from_config(config.account)
    with writeback_session(warehouse.store(), dry_run=config.dry_run, account=account) as (con, store), \
            ocean_tracking_api.client(account) as client:
        items = items_from_source(config.source(), con, allow_formulas=config.allow_formulas,
                                  dataset=account.dataset_name)
        report = upload_documents(items, client, store, dry_run=config.dry_run)
    rows = [{"file": r.path, "name": r.name, "status": r.status, "step": r.step, "document_id": r.document_id,
             "errors": r.errors} for r in report.results]
    return _finish(context, report.counts, rows, config.dry_run, {"failed"})


@dg.job(description="Create tracking requests in bulk from a CSV file or DuckDB table, exactly once per row.")
def create_tracking_requests_job() -> None:
    """One op: create_tracking_requests_op."""
    create_tracking_requests_op()


@dg.job(description="Set ref_numbers on shipments and containers (by id, container number or bill of lading).")
def patch_ref_numbers_job() -> None:
    """One op: patch_ref_numbers_op."""
    patch_ref_numbers_op()


@dg.job(description="Upload documents from a folder or manifest (direct upload, resumable, exactly once).")
def upload_documents_job() -> None:
    """One op: upload_documents_op."""
    upload_documents_op()


writeback_jobs = [create_tracking_requests_job, patch_ref_numbers_job, upload_documents_job]
