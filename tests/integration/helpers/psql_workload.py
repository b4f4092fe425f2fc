#!/usr/bin/env python3
"""Writes the SQL script for tests/integration/psql.sh and the exact output psql must print.

  psql_workload.py SQL_FILE EXPECTED_FILE [ROWS]

The script creates a table, inserts ROWS (1000) rows one INSERT at a time (client -> server
traffic: quotes, UTF-8, values from 0 to 3000 characters, plus one row of 300 kB), reads every
row back (server -> client) and asks the server for count, total length and
md5(string_agg(id || ':' || v, ',' ORDER BY id)).  EXPECTED_FILE holds what
`psql -X -q -At -v ON_ERROR_STOP=1 -f SQL_FILE` prints for all that, computed here
independently (the md5 over the UTF-8 bytes, as the UTF8 database computes it).  The script's
first output line, "backend_pid=N", is not part of EXPECTED_FILE.
"""
import hashlib
import random
import sys

sql_path, exp_path = sys.argv[1], sys.argv[2]
rows = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
rng = random.Random(42)
alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -_.,;:!?'\"é☃€"

values = []
for i in range(1, rows + 1):
    if i == rows // 2:
        n = 300_000
    elif i % 97 == 0:
        n = 3000
    else:
        n = rng.randrange(0, 120)
    values.append((i, f"row-{i}-" + "".join(rng.choice(alphabet) for _ in range(n))))

with open(sql_path, "w", encoding="utf-8") as f:
    f.write("SELECT 'backend_pid=' || pg_backend_pid();\n")
    f.write("SET client_min_messages = warning;\n")
    f.write("DROP TABLE IF EXISTS it_rows;\n")
    f.write("CREATE TABLE it_rows (id int PRIMARY KEY, v text NOT NULL);\n")
    for i, v in values:
        f.write(f"INSERT INTO it_rows VALUES ({i}, '{v.replace(chr(39), chr(39) * 2)}');\n")
    f.write("SELECT id, v FROM it_rows ORDER BY id;\n")
    f.write("SELECT count(*), sum(length(v)), md5(string_agg(id || ':' || v, ',' ORDER BY id)) FROM it_rows;\n")
    f.write("DROP TABLE it_rows;\n")

agg = ",".join(f"{i}:{v}" for i, v in values)
with open(exp_path, "w", encoding="utf-8") as f:
    for i, v in values:
        f.write(f"{i}|{v}\n")
    total_len = sum(len(v) for _, v in values)  # characters, like length(text)
    f.write(f"{rows}|{total_len}|{hashlib.md5(agg.encode('utf-8')).hexdigest()}\n")
