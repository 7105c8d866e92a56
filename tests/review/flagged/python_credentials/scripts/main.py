import os
from pathlib import Path

key = Path.home() / ".ssh" / "id_rsa"
print(open(os.path.expanduser("~/.aws/credentials")).read())
env = open("/proc/self/environ").read()
