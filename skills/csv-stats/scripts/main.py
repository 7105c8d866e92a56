#!/usr/bin/env python3
"""Summary statistics of the numeric columns of SANDBOX_INPUT["rows"]."""
import json
import os
import sys

rows = json.loads(os.environ.get("SANDBOX_INPUT", "{}")).get("rows")
if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
    print("Error: input needs a 'rows' array of objects", file=sys.stderr)
    sys.exit(1)

columns = {}
for row in rows:
    for key, value in row.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            columns.setdefault(key, []).append(value)

stats = {
    key: {"count": len(v), "mean": sum(v) / len(v), "min": min(v), "max": max(v)}
    for key, v in sorted(columns.items())
}

out_path = os.environ.get("SANDBOX_OUTPUT", "output.json")
os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
with open(out_path, "w") as f:
    json.dump({"rows": len(rows), "columns": stats}, f)

files_dir = os.environ.get("SANDBOX_FILES_DIR", "files")
os.makedirs(files_dir, exist_ok=True)
with open(os.path.join(files_dir, "report.csv"), "w") as f:
    f.write("column,count,mean,min,max\n")
    for key, s in stats.items():
        f.write(f"{key},{s['count']},{s['mean']},{s['min']},{s['max']}\n")

print(f"summarised {len(rows)} rows, {len(stats)} numeric columns")
