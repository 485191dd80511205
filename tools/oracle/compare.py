#!/usr/bin/python3
"""compare.py A.f32 B.f32 [--rel 1e-4] [--vocab V]

Raw little-endian float32 files of equal length. Prints max|A-B|, max|A|,
the relative figure, and argmax agreement (per row of --vocab values if
given, else over the whole file). Exit status 1 if max|A-B| > rel*max|A|
(or the sizes differ), 0 otherwise.
"""

import argparse
import sys

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rel", type=float, default=1e-4)
    ap.add_argument("--vocab", type=int, default=0, help="row length for per-row argmax")
    a = ap.parse_args(argv)
    A = np.fromfile(a.a, dtype="<f4").astype(np.float64)
    B = np.fromfile(a.b, dtype="<f4").astype(np.float64)
    if A.size != B.size:
        print("size mismatch: %d vs %d values" % (A.size, B.size))
        return 1
    if A.size == 0:
        print("empty files")
        return 1
    if not (np.all(np.isfinite(A)) and np.all(np.isfinite(B))):
        print("non-finite values present")
        return 1
    d = np.abs(A - B)
    mx = float(d.max())
    ma = float(np.abs(A).max())
    rel = mx / ma if ma > 0 else (0.0 if mx == 0 else float("inf"))
    if a.vocab > 0 and A.size % a.vocab == 0:
        ra = A.reshape(-1, a.vocab)
        rb = B.reshape(-1, a.vocab)
        agree = int(np.sum(np.argmax(ra, 1) == np.argmax(rb, 1)))
        argmax_s = "%d/%d rows" % (agree, ra.shape[0])
        ok_arg = agree == ra.shape[0]
    else:
        ok_arg = int(np.argmax(A)) == int(np.argmax(B))
        argmax_s = "%s (A %d, B %d)" % ("yes" if ok_arg else "NO", int(np.argmax(A)), int(np.argmax(B)))
    print("n=%d max|d|=%.6g at %d  max|A|=%.6g  rel=%.3g  argmax agree: %s"
          % (A.size, mx, int(np.argmax(d)), ma, rel, argmax_s))
    if mx > a.rel * ma:
        print("FAIL: max|d| > %g * max|A| = %.6g" % (a.rel, a.rel * ma))
        return 1
    print("OK (rel tolerance %g)" % a.rel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
