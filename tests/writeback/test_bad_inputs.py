"""Bad write-back inputs through the real command line, against the real sandbox: each is refused with
exit code 2 and one stderr line naming file, line and column where that applies, without a traceback,
and nothing reaches the service (no request at all for patch-ref-numbers, no write for the others)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.cli import main
from pipelines.errors import InputError
from tests.support.sandboxes import FULL_KEY, api_get, routes

REPO = Path(__file__).resolve().parents[2]
WRITES = ("POST", "PATCH", "PUT", "DELETE")
SHIPMENT = "00000000-0000-4000-8000-000000000001"  # a well-formed id: rows fail before it matters


def common(server) -> list[str]:
    """The CLI's options for `server`; the warehouse is the default one, the DuckLake of the test's data folder."""
    return ["--base-url", server.base_url, "--api-key", FULL_KEY, "--rate-window", "0.05"]


def refuse(capsys, argv: list[str]) -> str:
    """Run the CLI, expect exit 2, and return its single stderr line (no traceback)."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    return err


def write(path: Path, content: str | bytes) -> Path:
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


BAD_REF_FILES = {
    "binary": (b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + bytes(range(256)) * 4, ["bad.csv: is a binary file"]),
    "latin-1": (b"shipment_id,ref_numbers\n" + f"{SHIPMENT},CAF\xc9-1\n".encode("latin-1"),
                ["bad.csv line 2: is not UTF-8", "0xc9", "save it as UTF-8"]),
    "empty": (b"", ["bad.csv: the file is empty", "expected header: ref_numbers"]),
    "blank lines only": ("\n\n  \n", ["bad.csv: the file is empty"]),
    "field over 128 KB": (f'shipment_id,ref_numbers\n{SHIPMENT},"{"x" * 140_000}"\n',
                          ["bad.csv line 2: a field is over 128 KB"]),
    "unclosed quote": (f'shipment_id,ref_numbers\n{SHIPMENT},"R1\n{SHIPMENT},R2\n' + "y" * 140_000,
                       ["bad.csv line 2: a field is over 128 KB", "quote never closed"]),
    "stray quote": (f'shipment_id,ref_numbers\n{SHIPMENT},"R1"x\n', ["bad.csv line 2: malformed CSV",
                                                                       "double quotes"]),
    "unquoted comma": (f"shipment_id,ref_numbers\n{SHIPMENT},R1\n{SHIPMENT},R1,R2\n",
                       ["bad.csv line 3: 3 fields but the header has 2", "separated by ';'"]),
    "too few fields": (f"shipment_id,container_id,ref_numbers\n{SHIPMENT},R1\n",
                       ["bad.csv line 2: 2 fields but the header has 3"]),
    "missing ref_numbers column": (f"shipment_id\n{SHIPMENT}\n",
                                   ["bad.csv line 1: missing column ref_numbers", "expected header"]),
    "misnamed column": (f"shipment_id,refs\n{SHIPMENT},R1\n",
                        ["bad.csv line 1: unexpected column refs (did you mean ref_numbers?)",
                         "missing column ref_numbers"]),
    "extra column": (f"shipment_id,ref_numbers,note\n{SHIPMENT},R1,hello\n",
                     ["bad.csv line 1: unexpected column note", "expected header: ref_numbers, one or more of "
                      "shipment_id|container_id|container_number|bill_of_lading_number|bill_of_lading"]),
    "no target column": ("ref_numbers\nR1\n", ["missing column shipment_id|container_id"]),
    "duplicate column": (f"shipment_id,ref_numbers,ref_numbers\n{SHIPMENT},R1,R2\n",
                         ["bad.csv line 1: duplicate column ref_numbers"]),
    "semicolon-separated": (f"shipment_id;ref_numbers\n{SHIPMENT};R1\n",
                            ["not a ref numbers CSV", "';'-separated"]),
    "formula": (f'shipment_id,ref_numbers\n{SHIPMENT},R1\n{SHIPMENT},"=HYPERLINK(""http://x"",""y"")"\n',
                ["bad.csv line 3 column ref_numbers: '=HYPERLINK(", "formula", "--allow-formulas"]),
    "formula in a list": (f"shipment_id,ref_numbers\n{SHIPMENT},R1;@SUM(A1)\n",
                          ["bad.csv line 2 column ref_numbers: '@SUM(A1)'"]),
    "leading tab": (f'shipment_id,ref_numbers\n{SHIPMENT},"\tR1"\n', ["bad.csv line 2 column ref_numbers"]),
}


@pytest.mark.parametrize("case", list(BAD_REF_FILES))
def test_patch_ref_numbers_refuses_bad_files_before_any_request(case, server, tmp_path, capsys):
    content, expected = BAD_REF_FILES[case]
    batch = write(tmp_path / "bad.csv", content)
    err = refuse(capsys, ["patch-ref-numbers", str(batch), *common(server)])
    for text in expected:
        assert text in err, err
    assert routes(server) == {}  # not a single request


def test_missing_file_folder_readme_and_unknown_table(server, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = common(server)
    assert refuse(capsys, ["patch-ref-numbers", "missing.csv", *args]).endswith(
        "missing.csv: no such file, nor a table of that name in the warehouse; give the path of a CSV file, "
        "or a [schema.]table in the warehouse")
    assert "is a folder, not a CSV file" in refuse(capsys, ["patch-ref-numbers", str(tmp_path), *args])
    readme = refuse(capsys, ["patch-ref-numbers", str(REPO / "README.md"), *args])
    assert "README.md line 1: not a ref numbers CSV: the first line '#" in readme and "expected header" in readme
    assert "no_such_table: no such file, nor a table" in refuse(capsys, ["patch-ref-numbers", "no_such_table", *args])
    assert routes(server) == {}


def test_every_command_refuses_a_bad_input_and_writes_nothing(server, tmp_path, capsys):
    args = common(server)
    inputs = {  # command → its header and a good first value
        "create-tracking-requests": ("request_number,request_type,ref_numbers", "WBBAD001,bill_of_lading"),
        "upload-documents": ("file,name,shipment_id", "a.pdf,Invoice"),
    }
    for command, (header, good) in inputs.items():
        folder = tmp_path / command
        folder.mkdir()
        latin = write(folder / "latin.csv", f"{header}\n{good},CAF\xc9\n".encode("latin-1"))
        comma = write(folder / "comma.csv", f"{header}\n{good},PO-1,PO-2\n")
        formula = write(folder / "formula.csv", f"{header}\n{good},\n{good},-cmd|calc!A0\n")
        assert "latin.csv line 2: is not UTF-8" in refuse(capsys, [command, str(latin), *args])
        assert "comma.csv line 2: 4 fields but the header has 3" in refuse(capsys, [command, str(comma), *args])
        column = header.rsplit(",", 1)[1]
        assert f"formula.csv line 3 column {column}: '-cmd|" in refuse(capsys, [command, str(formula), *args])
    misnamed = write(tmp_path / "misnamed.csv", "request_numbr,request_type\nWBBAD003,bill_of_lading\n")
    err = refuse(capsys, ["create-tracking-requests", str(misnamed), *args])
    assert "misnamed.csv line 1: unexpected column request_numbr (did you mean request_number?)" in err
    assert "missing column request_number" in err and "scac, ref_numbers" in err
    assert not [route for route in routes(server) if route.startswith(WRITES)]


def test_allow_formulas_sends_the_value_as_it_is(server, tmp_path, capsys):
    shipment = api_get(server, "/shipments", **{"page[size]": 1})["data"][0]["id"]
    batch = write(tmp_path / "refs.csv", f"shipment_id,ref_numbers\n{shipment},=1+1;-5;+1-555\n")
    args = ["patch-ref-numbers", str(batch), "--replace", *common(server)]
    assert "=1+1" in refuse(capsys, args)
    assert main([*args, "--allow-formulas"]) == 0
    assert api_get(server, f"/shipments/{shipment}")["data"]["attributes"]["ref_numbers"] == ["=1+1", "-5", "+1-555"]


@pytest.mark.slow
def test_one_line_without_traceback_in_a_real_process_and_debug_shows_it(server, tmp_path, capsys):
    batch = write(tmp_path / "refs.csv", f"shipment_id,ref_numbers\n{SHIPMENT},R1,R2\n")
    env = {**os.environ, "COLUMNS": "60"}  # a narrow terminal must not wrap the line
    done = subprocess.run([sys.executable, "-m", "pipelines", "patch-ref-numbers", str(batch),
                           *common(server)], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: ") and "refs.csv line 2: 3 fields but the header has 2" in done.stderr
    with pytest.raises(InputError, match="line 2"):
        main(["--debug", "patch-ref-numbers", str(batch), *common(server)])
    assert routes(server) == {}
