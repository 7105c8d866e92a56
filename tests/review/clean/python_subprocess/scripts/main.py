"""Counts the lines of the files given as arguments."""
import json
import os
import subprocess
import sys


def count(path):
    result = subprocess.run(["wc", "-l", path], capture_output=True, text=True, check=True)
    return int(result.stdout.split()[0])


def main():
    counts = {p: count(p) for p in sys.argv[1:]}
    out = os.path.join(os.environ.get("SANDBOX_OUTPUT", "."), "counts.json")
    with open(out, "w") as f:
        json.dump(counts, f)
    with open("out.txt", "w") as f:
        f.write(str(sum(counts.values())))
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
