#!/usr/bin/env python3
"""Checks an ES256 compact JWS with pyca/cryptography, independently of our Swift code.

Usage: verify_es256.py PUBLIC_KEY_PEM_FILE TOKEN
Exit status 0 when the signature is valid, 1 when it is not, 2 on bad usage.
"""

import base64
import json
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1], "rb") as handle:
        key = serialization.load_pem_public_key(handle.read())
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        print("not a P-256 public key", file=sys.stderr)
        return 2
    parts = sys.argv[2].split(".")
    if len(parts) != 3:
        print("token does not have 3 segments", file=sys.stderr)
        return 1
    header = json.loads(b64url_decode(parts[0]))
    if header.get("alg") != "ES256":
        print("header alg is not ES256", file=sys.stderr)
        return 1
    raw = b64url_decode(parts[2])
    if len(raw) != 64:
        print(f"signature is {len(raw)} bytes, not 64 raw R||S", file=sys.stderr)
        return 1
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    try:
        key.verify(der, (parts[0] + "." + parts[1]).encode("ascii"), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        print("invalid signature", file=sys.stderr)
        return 1
    print("valid ES256 signature")
    return 0


if __name__ == "__main__":
    sys.exit(main())
