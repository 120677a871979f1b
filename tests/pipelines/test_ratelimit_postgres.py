"""The limiter's PostgreSQL log on a real server: chosen by its URL, created once however many start at once,
one-line errors that never show the password, a dropped connection reopened. (What both backends share,
the client's 429 retry included, is in test_ratelimit.py.)"""

from __future__ import annotations

import logging
import traceback

import pytest

from pipelines.api.ratelimit import TABLE, LimiterDatabaseError, LimiterUrl, SlidingWindowLimiter
from pipelines.errors import ConfigurationError, PipelineError
from tests.support.holders import start_at_once
from tests.support.postgres import free_port

FP = "abcdef123456"


def _logged(database) -> list[tuple]:
    return database.query(f"select key, bucket from {TABLE} order by id")


def test_the_url_selects_the_backend(postgres_database, tmp_path):
    on_postgres = SlidingWindowLimiter(FP, url=postgres_database.dsn, limits={"default": 5})
    on_sqlite = SlidingWindowLimiter(FP, url=LimiterUrl.sqlite(tmp_path / "rates.sqlite"), limits={"default": 5})
    on_postgres.acquire()
    on_sqlite.acquire()
    on_postgres.close()
    on_sqlite.close()

    assert _logged(postgres_database) == [(FP, "default")]  # one admit each: the PostgreSQL one landed here
    assert (tmp_path / "rates.sqlite").exists() and on_sqlite.path == tmp_path / "rates.sqlite"
    assert on_postgres.path is None


@pytest.mark.parametrize("url", ["mysql://u:hunter2@h/db", "ratelimit.sqlite", "sqlite://relative.sqlite", "  "])
def test_a_bad_url_is_one_clear_line(url):
    with pytest.raises(ConfigurationError) as info:
        SlidingWindowLimiter(FP, url=url)
    message = str(info.value)
    assert "\n" not in message and "SOURCES__OCEAN_TRACKING__LIMITER_URL" in message
    assert "hunter2" not in message  # the URL is not echoed


def _assert_safe(error: BaseException, password: str, where: str) -> None:
    message = str(error)
    assert isinstance(error, PipelineError)
    assert "\n" not in message and where in message, message
    everything = message + repr(error) + "".join(traceback.format_exception(error))
    assert password not in everything


def test_an_unreachable_server_is_one_line_without_the_password(caplog):
    password = "s3cret-pass-unreachable"
    port = free_port()  # nothing listens there
    caplog.set_level(logging.DEBUG)
    with pytest.raises(LimiterDatabaseError) as info:
        SlidingWindowLimiter(FP, url=f"postgresql://limiter:{password}@127.0.0.1:{port}/rates?connect_timeout=5")
    _assert_safe(info.value, password, f"127.0.0.1:{port}/rates")
    assert password not in caplog.text


def test_bad_credentials_are_one_line_without_the_password(postgres_server, postgres_database, caplog):
    password = "wrong-pass-4b1d"
    url = f"postgresql://postgres:{password}@{postgres_server.host}:{postgres_server.port}/{postgres_database.name}"
    caplog.set_level(logging.DEBUG)
    with pytest.raises(LimiterDatabaseError) as info:
        SlidingWindowLimiter(FP, url=url)
    _assert_safe(info.value, password, f"{postgres_server.host}:{postgres_server.port}/{postgres_database.name}")
    assert "password authentication failed" in str(info.value)
    assert password not in caplog.text


def test_the_password_is_in_no_repr(postgres_server, postgres_database):
    limiter = SlidingWindowLimiter(FP, url=postgres_database.dsn)
    shown = repr(limiter) + str(limiter) + repr(limiter.url) + str(limiter.url) + repr(limiter._log)
    limiter.close()
    assert postgres_server.password not in shown
    assert f"{postgres_server.port}/{postgres_database.name}" in shown


def test_concurrent_first_use_of_a_fresh_database_creates_the_table_once(postgres_database):
    starters = 8
    limiters: list[SlidingWindowLimiter] = []

    def start(_: int) -> None:
        limiter = SlidingWindowLimiter(FP, url=postgres_database.dsn, limits={"default": 100})
        limiter.acquire()
        limiters.append(limiter)

    failures = start_at_once(start, starters)
    for limiter in limiters:
        limiter.close()

    assert failures == []
    assert postgres_database.query("select count(*) from pg_class where relname = %s", (TABLE,)) == [(1,)]
    assert len(_logged(postgres_database)) == starters


def test_a_dropped_connection_is_opened_again(postgres_database):
    limiter = SlidingWindowLimiter(FP, url=postgres_database.dsn, limits={"default": 10})
    limiter.acquire()
    postgres_database.query(
        "select pg_terminate_backend(pid) from pg_stat_activity "
        "where datname = current_database() and application_name = 'ocean-tracking rate limiter'"
    )
    limiter.acquire()  # the server closed the session between two takes: nothing was lost, so it reconnects
    limiter.close()
    assert len(_logged(postgres_database)) == 2
