"""scripts/cl100k.py — tiktoken's cl100k_base encoding without network access.

tiktoken downloads the BPE ranks of cl100k_base on first use; the machines this project runs on
reach only PyPI and Debian. The PyPI package bpe-openai ships the same file
(bpe_openai/data/cl100k_base.tiktoken.gz); `encoding()` places it in tiktoken's cache under the
name tiktoken looks for, and tiktoken checks its SHA-256 before using it.
usage: from cl100k import encoding; len(encoding().encode(text))
"""
import gzip
import hashlib
import os
import tempfile

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


def encoding():
    cache = os.environ.setdefault("TIKTOKEN_CACHE_DIR", os.path.join(tempfile.gettempdir(), "sheaf-tiktoken"))
    path = os.path.join(cache, hashlib.sha1(CL100K_URL.encode()).hexdigest())
    if not os.path.exists(path):
        import bpe_openai

        data = gzip.open(os.path.join(os.path.dirname(bpe_openai.__file__), "data", "cl100k_base.tiktoken.gz")).read()
        if hashlib.sha256(data).hexdigest() != CL100K_SHA256:
            raise RuntimeError("bpe-openai's cl100k_base differs from tiktoken's")
        os.makedirs(cache, exist_ok=True)
        tmp = path + ".tmp%d" % os.getpid()
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    import tiktoken

    return tiktoken.get_encoding("cl100k_base")


if __name__ == "__main__":
    import sys

    enc = encoding()
    for name in sys.argv[1:]:
        print(len(enc.encode(open(name, encoding="utf-8").read())), name)
