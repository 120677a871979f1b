"""The Postgres test fixture itself (tests/support/postgres.py): a real server, a fresh PostGIS database a
test, and nothing left behind once it stops."""

from __future__ import annotations

import socket

from tests.support.postgres import start_server, stop_server


def test_each_test_gets_an_empty_database_with_postgis(postgres_server, postgres_database):
    [(name, version)] = postgres_database.query("select current_database(), postgis_lib_version()")
    assert name == postgres_database.name and version.startswith("3.")
    assert postgres_database.query(
        "select count(*) from information_schema.tables where table_schema not in "
        "('pg_catalog', 'information_schema', 'public')"
    ) == [(0,)]
    other = postgres_server.create_database()
    try:
        assert other.name != postgres_database.name
        other.query("create table only_here (id int)")
        assert postgres_database.query("select to_regclass('only_here') is null") == [(True,)]
    finally:
        postgres_server.drop_database(other.name)
    assert postgres_database.query("select count(*) from pg_database where datname = %s", (other.name,)) == [(0,)]


def test_a_stopped_server_closes_its_port_and_leaves_no_folder():
    server = start_server()
    with socket.create_connection((server.host, server.port), timeout=5):
        pass
    stop_server(server.root)

    assert not server.root.exists()
    with socket.socket() as probe:
        assert probe.connect_ex((server.host, server.port)) != 0
