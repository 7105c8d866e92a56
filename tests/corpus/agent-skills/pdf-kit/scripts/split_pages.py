import sys

for arg in sys.argv[1:]:
    print(arg)
