"""Fetches the current weather of a city."""
# Uses requests (the skill declares network: true); curl would do as well.
import json
import sys

import requests


def main():
    city = sys.argv[1] if len(sys.argv) > 1 else "Oslo"
    resp = requests.get("https://api.example.com/weather", params={"q": city}, timeout=10)
    resp.raise_for_status()
    print(json.dumps(resp.json()))


if __name__ == "__main__":
    main()
