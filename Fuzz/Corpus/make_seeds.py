#!/usr/bin/env python3
"""Writes the seed corpora under Fuzz/Corpus/<target>/ from the shapes Apple really sends
(and, for the request heads, nginx and Caddy).

Run once by hand (python3 Fuzz/Corpus/make_seeds.py); the output is committed. Keys are made
fresh each run (python `cryptography`), so signatures are real RS256/ES256 but by throwaway keys:
the fuzz targets sign with their own key where they need to get past the signature.
"""
import base64, hashlib, json, pathlib, urllib.parse

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

ROOT = pathlib.Path(__file__).resolve().parent
NOW = 1_700_000_000  # AppleStandIn.now
CLIENT = "com.example.web"
NATIVE = "com.example.app"
NONCE = "fuzz-nonce"
CODE = "fuzz-code"


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def uint(n: int) -> bytes:
    return n.to_bytes((n.bit_length() + 7) // 8, "big")


rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
ec_key = ec.generate_private_key(ec.SECP256R1())


def jws(header: dict, payload: bytes, alg: str = "RS256") -> str:
    signing_input = b64u(json.dumps(header, separators=(",", ":")).encode()) + "." + b64u(payload)
    if alg == "RS256":
        signature = rsa_key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    else:
        r, s = decode_dss_signature(ec_key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    return signing_input + "." + b64u(signature)


def c_hash(code: str) -> str:
    return b64u(hashlib.sha256(code.encode()).digest()[:16])


def claims(**extra) -> dict:
    base = {"iss": "https://appleid.apple.com", "aud": CLIENT, "exp": NOW + 600, "iat": NOW,
            "sub": "001234.5b7ac5a0a5a34a5f9d7b0b4f1c1d2e3f.1234", "c_hash": c_hash(CODE),
            "email": "abc123xyz@privaterelay.appleid.com", "email_verified": "true",
            "is_private_email": "true", "auth_time": NOW - 5, "nonce_supported": True, "nonce": NONCE}
    base.update(extra)
    return {k: v for k, v in base.items() if v is not None}


def dumps(value) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def write(target: str, name: str, data):
    folder = ROOT / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())


# --- identity-token claims (FuzzIdentityClaims: mode byte + JSON) --------------------------------
claim_sets = {
    "web-first": claims(),
    "web-bools": claims(email_verified=True, is_private_email=False, real_user_status=2),
    "native-sha-nonce": claims(aud=NATIVE, nonce=hashlib.sha256(NONCE.encode()).hexdigest(), c_hash=None),
    "aud-array": claims(aud=[CLIENT]),
    "aud-two": claims(aud=[CLIENT, NATIVE]),
    "float-times": claims(exp=NOW + 600.5, iat=NOW + 0.25, auth_time=1.7e9),
    "no-email": claims(email=None, email_verified=None, is_private_email=None),
    "transfer": claims(transfer_sub="002222.aaaa.3333", real_user_status=0),
    "expired": claims(exp=NOW - 3600, iat=NOW - 7200),
    "wrong-iss": claims(iss="https://evil.example"),
    "missing-sub": claims(sub=None),
    "bad-chash": claims(c_hash="AAAAAAAAAAAAAAAAAAAAAA"),
}
modes = {"web-first": 5, "web-bools": 1, "native-sha-nonce": 2, "aud-array": 0, "aud-two": 0, "float-times": 4,
         "no-email": 1, "transfer": 0, "expired": 0, "wrong-iss": 0, "missing-sub": 0, "bad-chash": 4}
for name, value in claim_sets.items():
    write("FuzzIdentityClaims", name + ".json", bytes([modes[name]]) + dumps(value))

# --- compact JWS (FuzzCompactJWS) -------------------------------------------------------------------
rs_header = {"kid": "W6WcOKB", "alg": "RS256"}
id_token = jws(rs_header, dumps(claim_sets["web-first"]))
write("FuzzCompactJWS", "id-token-rs256.txt", id_token)
write("FuzzCompactJWS", "id-token-native.txt", jws(rs_header, dumps(claim_sets["native-sha-nonce"])))
write("FuzzCompactJWS", "client-secret-es256.txt",
      jws({"alg": "ES256", "kid": "ABC123DEFG"},
          dumps({"iss": "DEF123GHIJ", "iat": NOW, "exp": NOW + 86400, "aud": "https://appleid.apple.com", "sub": CLIENT}),
          alg="ES256"))
write("FuzzCompactJWS", "alg-none.txt", b64u(b'{"alg":"none"}') + "." + b64u(dumps(claim_sets["web-first"])) + ".")
write("FuzzCompactJWS", "hs256.txt", jws({"alg": "HS256", "kid": "W6WcOKB", "typ": "JWT"}, dumps(claim_sets["web-first"])))
write("FuzzCompactJWS", "crit.txt", jws({"alg": "RS256", "kid": "W6WcOKB", "crit": ["exp"], "exp": 1}, b"{}"))
write("FuzzCompactJWS", "no-kid.txt", jws({"alg": "RS256"}, b"{}"))
write("FuzzCompactJWS", "truncated-signature.txt", id_token[:-10])
write("FuzzCompactJWS", "base64url.txt", b64u(bytes(range(0, 256, 7))))
write("FuzzCompactJWS", "base64-padded.txt", base64.b64encode(b"\xfb\xff\xfe token key").decode())

# --- JWKs (FuzzJWK) ---------------------------------------------------------------------------------
public = rsa_key.public_key().public_numbers()
rsa_jwk = {"kty": "RSA", "kid": "W6WcOKB", "use": "sig", "alg": "RS256", "n": b64u(uint(public.n)), "e": b64u(uint(public.e))}
other = rsa.generate_private_key(public_exponent=65537, key_size=4096).public_key().public_numbers()
rsa4096 = {"kty": "RSA", "kid": "fh6Bs8C", "use": "sig", "alg": "RS256", "n": b64u(uint(other.n)), "e": b64u(uint(other.e))}
point = ec_key.public_key().public_numbers()
ec_jwk = {"kty": "EC", "kid": "ABC123DEFG", "crv": "P-256", "alg": "ES256", "use": "sig",
          "x": b64u(point.x.to_bytes(32, "big")), "y": b64u(point.y.to_bytes(32, "big"))}
write("FuzzJWK", "apple-keys.json", json.dumps({"keys": [rsa_jwk, rsa4096]}, indent=2))
write("FuzzJWK", "rsa.json", dumps(rsa_jwk))
write("FuzzJWK", "ec.json", dumps(ec_jwk))
write("FuzzJWK", "mixed-set.json", dumps({"keys": [ec_jwk, rsa_jwk, {"kty": "oct", "k": "AAAA"}]}))
write("FuzzJWK", "rsa-enc.json", dumps(dict(rsa_jwk, use="enc")))
write("FuzzJWK", "ec-wrong-curve.json", dumps(dict(ec_jwk, crv="P-384")))
write("FuzzJWK", "rsa-leading-zero.json", dumps(dict(rsa_jwk, n=b64u(b"\x00" + uint(public.n)), e="AAEAAQ")))

# --- the user JSON (FuzzUserPayload) ----------------------------------------------------------------
users = {
    "first-sign-in": {"name": {"firstName": "Jane", "lastName": "Appleseed"}, "email": "jane@example.com"},
    "private-relay": {"name": {"firstName": "Ming", "lastName": "Li"}, "email": "abc123xyz@privaterelay.appleid.com"},
    "name-only": {"name": {"firstName": "José", "lastName": "García Núñez"}},
    "email-only": {"email": "someone@example.com"},
    "blank": {"name": {"firstName": "  ", "lastName": "\t"}, "email": "not-an-email"},
    "controls": {"name": {"firstName": "A\u0000\u200bB\u202e", "lastName": "\u00e9\u0301"}, "email": "x@y"},
    "long": {"name": {"firstName": "\U0001F469\u200d\U0001F4BB" * 120, "lastName": "L" * 260}},
    "wrong-types": {"name": ["Jane"], "email": 42},
}
for name, value in users.items():
    write("FuzzUserPayload", name + ".json", json.dumps(value, ensure_ascii=(name != "name-only")))
write("FuzzUserPayload", "empty-object.json", "{}")

# --- the callback form (FuzzCallbackForm) -----------------------------------------------------------
def form(fields) -> str:
    return urllib.parse.urlencode(fields)

user_json = json.dumps(users["first-sign-in"])
write("FuzzCallbackForm", "first-sign-in.txt",
      form([("state", "s" * 43), ("code", "c1a2b3c4d5e6f.0.nrxyz.abcdEFGHijklMNOPqrstUVWX"), ("id_token", id_token), ("user", user_json)]))
write("FuzzCallbackForm", "returning.txt", form([("state", "S0meState_-x"), ("code", CODE), ("id_token", id_token)]))
write("FuzzCallbackForm", "cancelled.txt", form([("error", "user_cancelled_authorize"), ("state", "S0meState_-x")]))
write("FuzzCallbackForm", "profile.txt", form([("csrf", "abcDEF123"), ("givenName", "Zoë"), ("familyName", "Ørsted")]))
write("FuzzCallbackForm", "nested-keys.txt", "user[name][firstName]=A&user[email]=b&state[]=1&state[]=2&code=%E2%9C%93+x")
write("FuzzCallbackForm", "odd-encoding.txt", "code=%zz&state=%&id_token=a.b.c&&=&user=%7B%22name%22%3A%7B%7D%7D")

# --- notifications (FuzzNotification: mode byte + body or claims) -----------------------------------
def events(kind: str, **extra) -> dict:
    value = {"type": kind, "sub": claim_sets["web-first"]["sub"], "event_time": NOW * 1000}
    value.update(extra)
    return value

notifications = {
    "email-disabled": {"iss": "https://appleid.apple.com", "aud": CLIENT, "iat": NOW, "jti": "jti-1",
                       "events": json.dumps(events("email-disabled", email="abc@privaterelay.appleid.com", is_private_email="true"))},
    "consent-revoked": {"iss": "https://appleid.apple.com", "aud": CLIENT, "iat": NOW - 60, "jti": "jti-2",
                        "events": json.dumps(events("consent-revoked"))},
    "account-deleted-object": {"iss": "https://appleid.apple.com", "aud": [NATIVE], "iat": NOW, "exp": NOW + 3600,
                               "events": events("account-deleted")},
    "email-enabled-bool": {"iss": "https://appleid.apple.com", "aud": CLIENT, "iat": float(NOW),
                           "events": json.dumps(events("email-enabled", email="x@privaterelay.appleid.com", is_private_email=True))},
    "unknown-type": {"iss": "https://appleid.apple.com", "aud": CLIENT, "iat": NOW, "events": json.dumps(events("new-kind"))},
    "old": {"iss": "https://appleid.apple.com", "aud": CLIENT, "iat": NOW - 30 * 86400, "events": json.dumps(events("account-delete"))},
}
for name, value in notifications.items():
    write("FuzzNotification", "signed-" + name + ".json", b"\x01" + dumps(value))
    write("FuzzNotification", "body-" + name + ".json",
          b"\x00" + dumps({"payload": jws(rs_header, dumps(value))}))
write("FuzzNotification", "body-not-json.txt", b"\x00payload=abc")
write("FuzzNotification", "body-wrong-shape.json", b'\x00{"payload":42,"extra":[1,2]}')

# --- request heads (FuzzPlainRequestHead: one read's bytes) ------------------------------------------
def head(*lines: str, method: str = "GET", target: str = "/oauth2/auth") -> str:
    return "".join(line + "\r\n" for line in (f"{method} {target} HTTP/1.1",) + lines) + "\r\n"

COOKIE = "Cookie: __Host-siwa=AbC-123_xyz; theme=dark"
request_heads = {
    "nginx-check.txt": head("Host: siwa", COOKIE, "X-Forwarded-Uri: /private?a=1&b=%20c"),
    "caddy-check.txt": head("Host: localhost", "User-Agent: Go-http-client/1.1", "Accept-Encoding: gzip", COOKIE,
                            "X-Forwarded-For: 127.0.0.1", "X-Forwarded-Method: GET", "X-Forwarded-Proto: http",
                            "X-Forwarded-Uri: /"),
    "redirect-check.txt": head("Host: a.example", "Authorization: Bearer abc.def.ghi", target="/oauth2/auth?redirect=true"),
    "connection-close.txt": head("Host: x", "Connection: close"),
    "connection-keep-alive.txt": head("host:x", "CONNECTION:  Keep-Alive", "cookie:a=1", "COOKIE: b=2"),
    "proxy-connection-close.txt": head("Host: x", "Proxy-Connection: close"),
    "content-length.txt": head("Host: x", "Content-Length: 0", method="POST"),
    "every-method.txt": head("X!#$%&'*+-.^_`|~: in  side \"quoted\"", method="OPTIONS", target="/x;y=1:@!$'()*+,?q=/~"),
    "head-no-fields.txt": head(method="HEAD", target="/"),
    # NIO's HTTPHeaders[name] takes `^` for `~`; the target compares values by the letters' case only.
    "caret-tilde-names.txt": head("X^: 1", "x~: 2", "X^: 3"),
}
for name, text in request_heads.items():
    write("FuzzPlainRequestHead", name, text)
