import json
import requests
import urllib.request

resp = requests.get("https://api.example.com/data", timeout=10)
# curl is mentioned here, in a comment, which uses no network.
with urllib.request.urlopen("https://example.com") as r:
    print(json.load(r))
