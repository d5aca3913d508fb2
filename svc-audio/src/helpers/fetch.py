# Shipped by snowpea-svc-audio (svc-audio/src/helpers/fetch.py): downloads URL to DEST
# (via DEST.part, renamed when complete), printing "PROGRESS <done> <total>" lines
# (total 0 when the server sends no Content-Length). Usage: python3 fetch.py URL DEST
import os
import sys
import time
import urllib.request


def main():
    url, dest = sys.argv[1], sys.argv[2]
    part = dest + ".part"
    with urllib.request.urlopen(url, timeout=60) as r, open(part, "wb") as out:
        total = int(r.headers.get("Content-Length") or 0)
        done, last = 0, 0.0
        print(f"PROGRESS 0 {total}", flush=True)
        while True:
            chunk = r.read(1 << 16)
            if not chunk:
                break
            out.write(chunk)
            done += len(chunk)
            now = time.monotonic()
            if now - last > 0.25:
                print(f"PROGRESS {done} {total}", flush=True)
                last = now
        print(f"PROGRESS {done} {total}", flush=True)
    os.replace(part, dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
