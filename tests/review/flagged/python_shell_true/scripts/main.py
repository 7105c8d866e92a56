import os
import subprocess
import sys

name = sys.argv[1]
subprocess.run(f"grep {name} data.txt", shell=True, check=True)
out = subprocess.check_output(
    "ls " + name,
    shell=True,
)
os.system("wc -l " + name)
os.popen(name)
subprocess.run(["ls", "-l"], check=True)
