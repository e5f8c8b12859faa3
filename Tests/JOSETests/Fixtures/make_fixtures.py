#!/usr/bin/env python3
"""Writes the JOSE test fixtures with an independent implementation (pyca/cryptography).

Run from anywhere: python3 Tests/JOSETests/Fixtures/make_fixtures.py
Each run makes new random keys; the committed JSON is what the Swift tests check.
The Swift code must verify these signatures and open these sealed boxes without
ever having produced them, which catches mistakes a round trip through our own code
would hide (DER vs raw R||S, byte order, padding, nonce layout).
"""

import base64
import json
import os
import time

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

HERE = os.path.dirname(os.path.abspath(__file__))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def compact_json(value) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode("utf-8")


def pkcs8(key) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode("ascii")


def traditional(key) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode("ascii")


def spki(key) -> str:
    return key.public_bytes(
        serialization.Encoding.PEM,
        serialization.PublicFormat.SubjectPublicKeyInfo,
    ).decode("ascii")


def write(name: str, value) -> None:
    with open(os.path.join(HERE, name), "w", encoding="utf-8") as handle:
        json.dump(value, handle, indent=2, sort_keys=True)
        handle.write("\n")


def es256_fixture() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    numbers = key.public_key().public_numbers()
    now = int(time.time())
    header = {"alg": "ES256", "kid": "PYFIXTURE1", "typ": "JWT"}
    payload = {"iss": "TEAMID1234", "sub": "com.example.web", "aud": "https://appleid.apple.com",
               "iat": now, "exp": now + 3600}
    signing_input = b64url(compact_json(header)) + "." + b64url(compact_json(payload))
    der = key.sign(signing_input.encode("ascii"), ec.ECDSA(hashes.SHA256()))
    r, s = decode_dss_signature(der)
    raw = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    token = signing_input + "." + b64url(raw)
    write("es256.json", {
        "kid": header["kid"],
        "token": token,
        "payload": payload,
        "x": b64url(numbers.x.to_bytes(32, "big")),
        "y": b64url(numbers.y.to_bytes(32, "big")),
        "public_key_pem": spki(key.public_key()),
        "private_key_sec1_pem": traditional(key),
    })
    # The same key as Apple delivers it: a PKCS#8 PEM in a .p8 file.
    with open(os.path.join(HERE, "AuthKey_PYFIXTURE1.p8"), "w", encoding="ascii") as handle:
        handle.write(pkcs8(key))


def rs256_fixture() -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    numbers = key.public_key().public_numbers()
    now = int(time.time())
    header = {"alg": "RS256", "kid": "PYRSA1"}
    payload = {"iss": "https://appleid.apple.com", "aud": "com.example.web", "sub": "000123.abc.0456",
               "iat": now, "exp": now + 600, "nonce": "n-0S6_WzA2Mj", "email": "a@example.com",
               "email_verified": "true"}
    signing_input = b64url(compact_json(header)) + "." + b64url(compact_json(payload))
    signature = key.sign(signing_input.encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
    n = numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")
    e = numbers.e.to_bytes((numbers.e.bit_length() + 7) // 8, "big")
    write("rs256.json", {
        "kid": header["kid"],
        "token": signing_input + "." + b64url(signature),
        "payload": payload,
        "n": b64url(n),
        "e": b64url(e),
        "public_key_pem": spki(key.public_key()),
        "private_key_pkcs1_pem": traditional(key),
        "private_key_pkcs8_pem": pkcs8(key),
    })


def aesgcm_fixture() -> None:
    key = AESGCM.generate_key(bit_length=256)
    nonce = os.urandom(12)
    plaintext = b"r1f.refresh-token.example"
    aad = b"apple_tokens:000123.abc.0456"
    ciphertext_and_tag = AESGCM(key).encrypt(nonce, plaintext, aad)
    write("aesgcm.json", {
        "key_base64": base64.b64encode(key).decode("ascii"),
        "plaintext_base64": base64.b64encode(plaintext).decode("ascii"),
        "aad_base64": base64.b64encode(aad).decode("ascii"),
        # Layout shared with AESGCMKey: nonce || ciphertext || tag.
        "sealed_base64": base64.b64encode(nonce + ciphertext_and_tag).decode("ascii"),
    })


def wrong_keys_fixture() -> None:
    p384 = ec.generate_private_key(ec.SECP384R1())
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    small_rsa = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    ed = ed25519.Ed25519PrivateKey.generate()
    encrypted = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"fixture-password"),
    ).decode("ascii")
    write("wrong_keys.json", {
        "p384_pkcs8_pem": pkcs8(p384),
        "p384_public_key_pem": spki(p384.public_key()),
        "rsa_pkcs8_pem": pkcs8(rsa_key),
        "rsa_public_key_pem": spki(rsa_key.public_key()),
        "rsa1024_pkcs8_pem": pkcs8(small_rsa),
        "ed25519_pkcs8_pem": pkcs8(ed),
        "encrypted_p256_pkcs8_pem": encrypted,
    })


if __name__ == "__main__":
    es256_fixture()
    rs256_fixture()
    aesgcm_fixture()
    wrong_keys_fixture()
    print("fixtures written to", HERE)
