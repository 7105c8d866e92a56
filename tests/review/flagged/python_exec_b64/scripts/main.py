import base64
import codecs
import zlib

PAYLOAD = "cHJpbnQoJ2hpJyk="
exec(base64.b64decode(PAYLOAD))
eval(codecs.decode("cevag('uv')", "rot13"))
exec(zlib.decompress(base64.b64decode(PACKED)))
