#!/usr/bin/env python3
"""Offline expert-cache replacement study.

Replays a trace written by the engine with WASTE_CACHE_TRACE=FILE (one line
per event: `H layer ids...` a routing hint, `P layer ids...` the router
lookahead's ranked guesses for the next MoE layer, `A layer expert` a demand
access) through a model of src/streaming/expert_cache.cc, for several cache sizes,
policies, lookahead depths and prefetch gates. Timing is not modelled (reads
land at once), so hit rates are what the engine gets when reads keep up.

  cache_sim.py TRACE --slots 307,1112 --lookahead 0,6,8,12 --policy lfru,lru,opt --gate 0,0.3

Record the trace with the largest lookahead you want to study
(WASTE_LOOKAHEAD=16): shorter lookaheads use a prefix of the guesses.

Columns: hit% counts every demand access since open (prefill included, the
reference's definition), decode% decode steps only; MB/tok is every read
(demand misses and lookahead guesses) per decode token.

Policies: lfru (ENGINE.md §5.2, 16 samples), lfru-exact (full scan), lru,
lfu-history (decayed per-record access counts kept across evictions,
--half-life in accesses per slot), next-use (estimated reuse distance from
the per-layer pick rates), opt (Belady: evicts the record demanded farthest in
the future; an oracle, the bound for any replacement with the same reads),
reuse-odds (the engine's default since issue #18: farthest expected next use,
from reuse odds learned online per (tokens since last use, uses so far) plus
the layers until the record's layer comes round; run it with --gate 0.7 to
model the engine's lookahead gate), popularity (an oracle: evicts the record
used least often over the whole replay, ties to the least recent — the best
any fixed popularity ranking, a hotlist's included, can do).

TRACE may also be a routing trace (`.jsonl`, one {"layers": [[ids], ...]}
per token, e.g. a real model's routing): every token a decode step, no
lookahead guesses.

Read R (--started, the engine's WASTE_SPEC_RANKS): only the R best guesses
are read before their layer routes; a lower-ranked guess holds a slot and is
read only if the router picks it (a late lookahead hit), dropped unread if not.

Gate T (studied, not in the engine): a lookahead guess of rank r for layer
L is claimed only while the measured share of rank-r guesses for L that its
router then picked is at least T (0 = claim every guess).
"""
import argparse
import bisect
import sys

RECORD_MB = 2666496 / 1e6  # Kimi-Linear record (the container the figures are for)


def load_routing(path, prior_tokens=0, prior=None):
    """A routing trace (one JSON object per token, {"layers": [[ids of the
    first MoE layer], ...]}, e.g. a real model's): every token a decode step,
    MoE layers numbered from 1, no lookahead guesses. The first
    `prior_tokens` tokens are not replayed: their use counts per record go
    into `prior` (a dict) instead, as a hotlist from an earlier run."""
    import json
    events = []
    with open(path) as f:
        tok = 0
        for line in f:
            if not line.strip():
                continue
            for i, ids in enumerate(json.loads(line)["layers"]):
                if tok < prior_tokens:
                    for e in ids:
                        prior[(i + 1, e)] = prior.get((i + 1, e), 0) + 1
                    continue
                events.append(("H", i + 1, list(ids)))
                events.extend(("A", i + 1, [e]) for e in ids)
            tok += 1
    return events


def load(path, prior_tokens=0, prior=None):
    if path.endswith(".jsonl"):
        return load_routing(path, prior_tokens, prior)
    events = []
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) < 2 or p[0] == "#":  # '#' lines: the engine's counters at close
                continue
            events.append((p[0], int(p[1]), [int(x) for x in p[2:]]))
    return events


class Future:
    """Demand-access times per record, for the Belady oracle."""

    def __init__(self, events):
        self.times = {}
        t = 0
        for kind, layer, ids in events:
            if kind == "A":
                t += 1
                self.times.setdefault((layer, ids[0]), []).append(t)

    def uses(self, key):
        return len(self.times.get(key, ()))

    def next_use(self, key, now):
        ts = self.times.get(key)
        if not ts:
            return float("inf")
        i = bisect.bisect_right(ts, now)
        return ts[i] if i < len(ts) else float("inf")


class Hazard:
    """Reuse odds learned online from the trace itself: every record ever
    demanded is in a state (tokens since its last use, uses so far), both
    log2-bucketed; each token counts, per state, how many records were in it
    (exposure) and how many of them were used (reuse). Their ratio is the
    chance a record in that state is used in the coming token."""

    AGE_BUCKETS = 8
    COUNT_BUCKETS = 6

    def __init__(self):
        self.tok = 0
        self.last = {}
        self.cnt = {}
        n = self.AGE_BUCKETS * self.COUNT_BUCKETS
        self.exposure = [0.0] * n
        self.reused = [0.0] * n

    def state(self, k, tok):
        a = min((tok - self.last[k]).bit_length(), self.AGE_BUCKETS - 1)
        c = min(self.cnt[k].bit_length(), self.COUNT_BUCKETS - 1)
        return a * self.COUNT_BUCKETS + c

    def new_token(self):
        self.tok += 1
        for k in self.last:
            self.exposure[self.state(k, self.tok)] += 1

    def use(self, k):
        if k in self.last:
            if self.last[k] == self.tok:
                return  # again in the same token (a prefill chunk)
            self.reused[self.state(k, self.tok)] += 1
        self.last[k] = self.tok
        self.cnt[k] = self.cnt.get(k, 0) + 1

    def chance(self, k, next_token):
        if k not in self.last:
            return 0.01
        st = self.state(k, self.tok + next_token)
        return (self.reused[st] + 0.5) / (self.exposure[st] + 1.0)


class Sim:
    def __init__(self, slots, policy, lookahead, top_k, spec_hits=1, protect=True, gate=0.0,
                 half_life=16, future=None, prior=1.0, warmup=4, started=64):
        self.started = started
        self.protect = protect
        self.n = slots
        self.policy = policy
        self.la = lookahead
        self.top_k = top_k
        self.spec_hits = spec_hits
        self.gate = gate
        self.prior = prior
        self.warmup = warmup
        self.future = future
        self.key = [None] * slots         # slot -> (layer, expert)
        self.hits = [0] * slots
        self.last = [0] * slots
        self.pins = [0] * slots
        self.spec = [False] * slots       # loaded by lookahead, not yet used
        self.spec_gen = [0] * slots       # hints seen when it was guessed
        self.rank = [0] * slots           # lookahead rank of the guess
        self.guarded = [-1] * slots       # hint_seq when last guessed while resident
        self.hint_seq = 0
        self.index = {}
        self.free = list(range(slots - 1, -1, -1))
        self.clock = 0
        self.rng = 0x9E3779B9
        self.freq = {}
        self.fstep = 1.0
        self.fmul = 2.0 ** (1.0 / max(64, half_life * slots))
        self.hint = []                    # [expert, slot, state, miss]
        self.hint_layer = -1
        self.cursor = 0
        self.outstanding = 0
        self.window = max(1, min(64, slots // 2))
        self.c = dict(hit=0, miss=0, dhit=0, dmiss=0, spec=0, spec_used=0, ev=0, dspec=0, cancel=0, late=0)
        self.late_is_miss = True
        self.decode = False
        self.order = {}                   # MoE layer -> position in a token
        self.tokens = {}                  # MoE layer -> hints seen
        self.guess = {}                   # layer -> last ranked guess list
        self.right = {}                   # (layer, rank) -> [picked, guessed]
        self.hz = Hazard()
        self.protect_resident = False     # a resident lookahead guess is pending too
        self.now = {}                     # token-oracle: this token's routing per layer
        self.routing = []
        self.horizon = 0                  # horizon: tokens of routing the oracle sees

    # --- replacement ---------------------------------------------------------

    def stale(self, s):
        # An unused lookahead record whose layer has been routed: a wrong guess.
        return self.spec[s] and self.spec_gen[s] != self.hint_seq

    def pending(self, s):
        # An unused lookahead record whose layer has not been routed yet
        # (with --protect-resident also a guess that was already resident).
        if self.protect_resident and self.guarded[s] == self.hint_seq:
            return True
        return self.protect and self.spec[s] and self.spec_gen[s] == self.hint_seq

    def next_use(self, s):
        # Expected layer steps until (layer, expert) is used again: the
        # layers until its layer comes round, plus whole tokens while it is
        # not picked (an independent-reference estimate from the counts).
        layer, e = self.key[s]
        order = self.order
        d = (order.get(layer, 0) - order.get(self.hint_layer, 0)) % max(1, len(order))
        if d == 0:
            d = len(order)
        toks = self.tokens.get(layer, 0)
        p = (self.freq.get(self.key[s], 0) + 0.5) / (toks + 1.0)
        p = min(p, 1.0)
        return d + len(order) * (1.0 / p - 1.0)

    def expected_gap(self, s):
        # Layer steps until the record is next used: the layers until its
        # layer comes round, then whole tokens at the learned reuse odds.
        layer, e = self.key[s]
        order, n = self.order, max(1, len(self.order))
        d = (order.get(layer, 0) - order.get(self.hint_layer, 0)) % n
        passed = d == 0 or order.get(layer, 0) < order.get(self.hint_layer, 0)
        if d == 0:
            d = n
        if self.policy == "horizon":
            # The oracle knows the routing of this token and the next
            # `horizon` ones; beyond them it falls back on the learned odds.
            t, h = self.tok_index[self.hint_seq - 1], self.horizon
            first = t if not passed else t + 1
            uses = self.tok_uses.get(self.key[s], ())
            i = bisect.bisect_left(uses, first)
            if i < len(uses) and uses[i] <= t + h:
                return d + n * (uses[i] - first)
            p = self.hz.chance(self.key[s], 1)
            return d + n * (t + h + 1 - first) + n * (1.0 / p - 1.0)
        if self.policy == "token-oracle" and not passed:
            # The oracle knows which records this token's later layers route.
            picked = self.now.get(layer)
            if picked is not None:
                if e in picked:
                    return d
                p = self.hz.chance(self.key[s], 1)
                return d + n + n * (1.0 / p - 1.0)
        p = self.hz.chance(self.key[s], 1 if passed else 0)
        return d + n * (1.0 / p - 1.0)

    def better(self, a, b):
        if self.policy == "opt":
            return self.future.next_use(self.key[a], self.clock) > self.future.next_use(self.key[b], self.clock)
        if self.policy == "popularity":
            pa, pb = self.future.uses(self.key[a]), self.future.uses(self.key[b])
            return pa < pb or (pa == pb and self.last[a] < self.last[b])
        if self.protect:
            sa, sb = self.stale(a), self.stale(b)
            if sa != sb:
                return sa
        if self.policy == "next-use":
            return self.next_use(a) > self.next_use(b)
        if self.policy in ("reuse-odds", "token-oracle", "horizon"):
            return self.expected_gap(a) > self.expected_gap(b)
        if self.policy == "lru":
            return self.last[a] < self.last[b]
        if self.policy == "lfu-history":
            fa, fb = self.freq.get(self.key[a], 0), self.freq.get(self.key[b], 0)
            return fa < fb or (fa == fb and self.last[a] < self.last[b])
        return self.hits[a] < self.hits[b] or (self.hits[a] == self.hits[b] and self.last[a] < self.last[b])

    def victim(self):
        if self.free:
            return self.free.pop()
        best = -1
        if self.policy in ("lfru-exact", "lfu-history", "next-use", "opt", "reuse-odds", "popularity",
                           "token-oracle", "horizon"):
            for i in range(self.n):
                if self.pins[i] == 0 and not self.pending(i) and (best < 0 or self.better(i, best)):
                    best = i
        else:
            for _ in range(16):
                self.rng = (self.rng * 1664525 + 1013904223) & 0xFFFFFFFF
                i = self.rng % self.n
                if self.pins[i] or self.pending(i):
                    continue
                if best < 0 or self.better(i, best):
                    best = i
            if best < 0:
                for i in range(self.n):
                    if self.pins[i] == 0 and not self.pending(i):
                        best = i
                        break
        if best < 0 and self.protect:
            for i in range(self.n):
                if self.pins[i] == 0:
                    best = i
                    break
        if best < 0:
            raise RuntimeError("no slot")
        del self.index[self.key[best]]
        self.c["ev"] += 1
        return best

    def claim(self, s, k, hits):
        self.key[s] = k
        self.hits[s] = hits
        self.last[s] = self.clock
        self.pins[s] = 0
        self.spec[s] = False
        self.index[k] = s

    def demand_use(self, s):
        # A demand use: recency, and a lookahead guess turned out right.
        self.last[s] = self.clock
        if self.spec[s]:
            self.c["spec_used"] += 1
            self.spec[s] = False

    def count(self, hit):
        self.c["hit" if hit else "miss"] += 1
        if self.decode:
            self.c["dhit" if hit else "dmiss"] += 1

    # --- hints and demand -----------------------------------------------------

    def issue(self, e):
        k = (self.hint_layer, e[0])
        s = self.index.get(k)
        if s is not None and self.late_is_miss and self.spec[s] and self.rank[s] >= self.started:
            # A guess whose read never started (ranked past --started) is read
            # only now, when its layer routes: a miss in all but name. Counted
            # as one unless --late-hits (the reference's claim-based count).
            self.pins[s] += 1
            self.count(False)
            self.c["late"] += 1
            if self.decode:
                self.c["dspec"] -= 1  # its bytes are now a demand read's
            e[3] = True
        elif s is not None:
            self.pins[s] += 1
            e[3] = False
        else:
            s = self.victim()
            self.claim(s, k, 1)
            self.pins[s] = 1
            self.count(False)
            e[3] = True
        e[1] = s
        e[2] = 1
        self.outstanding += 1

    def issue_hints(self):
        while self.outstanding < self.window and self.cursor < len(self.hint):
            e = self.hint[self.cursor]
            if e[2] == 0:
                self.issue(e)
            self.cursor += 1

    def learn(self, layer, ids):
        # Score the last guess for this layer against what its router picked.
        g = self.guess.pop(layer, None)
        if g is None:
            return
        picked = set(ids)
        for r, x in enumerate(g):
            st = self.right.setdefault((layer, r), [0, 0])
            st[0] += x in picked
            st[1] += 1

    def cancel(self, layer, ids):
        # The engine reads at most `started` guesses per layer before it
        # routes (WASTE_SPEC_DEPTH reads in flight while the layer computes);
        # a later-ranked guess its router did not pick is dropped unread.
        picked = set(ids)
        for s in range(self.n):
            k = self.key[s]
            if (k is not None and k[0] == layer and self.spec[s] and self.rank[s] >= self.started
                    and self.spec_gen[s] == self.hint_seq and k[1] not in picked):
                del self.index[k]
                self.key[s] = None
                self.spec[s] = False
                self.free.append(s)
                self.c["cancel"] += 1
                self.c["dspec"] -= 1

    def on_hint(self, layer, ids):
        for e in self.hint:
            if e[2] == 1:
                self.pins[e[1]] -= 1
        if self.started < 64 and len(ids) <= self.top_k:
            self.cancel(layer, ids)
        self.decode = len(ids) <= self.top_k
        if self.decode:
            self.learn(layer, ids)
        if layer not in self.order:
            self.order[layer] = len(self.order)
        if self.hint_layer < 0 or self.order[layer] <= self.order.get(self.hint_layer, 0):
            self.hz.new_token()
        self.tokens[layer] = self.tokens.get(layer, 0) + 1
        self.now = self.routing[self.hint_seq] if self.routing else {}
        self.hint = [[x, -1, 0, False] for x in ids]
        self.hint_layer = layer
        self.hint_seq += 1
        self.cursor = 0
        self.outstanding = 0
        self.issue_hints()

    def touch(self, k):
        self.hz.use(k)
        if self.policy == "lfu-history":
            self.freq[k] = self.freq.get(k, 0) + self.fstep
            self.fstep *= self.fmul
        else:
            self.freq[k] = self.freq.get(k, 0) + 1

    def on_access(self, layer, expert):
        self.clock += 1
        k = (layer, expert)
        self.touch(k)
        if layer == self.hint_layer:
            for e in self.hint:
                if e[0] != expert or e[2] == 2:
                    continue
                if e[2] == 0:
                    self.issue(e)
                e[2] = 2
                self.outstanding -= 1
                s = e[1]
                self.pins[s] -= 1  # used and released at once
                if not e[3]:
                    self.count(True)
                    self.hits[s] += 1
                self.demand_use(s)
                self.issue_hints()
                return
        s = self.index.get(k)
        if s is not None:
            self.count(True)
            self.hits[s] += 1
            self.demand_use(s)
            return
        self.count(False)
        s = self.victim()
        self.claim(s, k, 1)

    # --- lookahead ------------------------------------------------------------

    def trusted(self, layer, rank):
        if self.gate <= 0:
            return True
        st = self.right.get((layer, rank))
        if st is None or st[1] < self.warmup:
            return self.prior >= self.gate
        return st[0] >= self.gate * st[1]

    def on_prefetch(self, layer, ids):
        ids = ids[: self.la]
        self.guess[layer] = ids
        for r, x in enumerate(ids):
            k = (layer, x)
            if k in self.index:
                self.guarded[self.index[k]] = self.hint_seq
                continue
            if not self.trusted(layer, r):
                continue
            s = self.victim()
            self.claim(s, k, self.spec_hits)
            self.spec[s] = True
            self.spec_gen[s] = self.hint_seq
            self.rank[s] = r
            self.c["spec"] += 1
            if self.decode:
                self.c["dspec"] += 1

    def run(self, events):
        # Per hint, the routing of every MoE layer of its token (for token-oracle).
        self.routing, order, tok, prev = [], {}, [], -1
        for kind, layer, ids in events:
            if kind != "H":
                continue
            if layer not in order:
                order[layer] = len(order)
            if prev < 0 or order[layer] <= order[prev]:
                tok = {}
            tok[layer] = set(ids)
            self.routing.append(tok)
            prev = layer
        # ... the token each hint is in, and the tokens each record is used in (horizon).
        self.tok_index, self.tok_uses, t = [], {}, -1
        for i, r in enumerate(self.routing):
            if i == 0 or r is not self.routing[i - 1]:
                t += 1
            self.tok_index.append(t)
        for i, r in enumerate(self.routing):
            if i == 0 or r is not self.routing[i - 1]:
                for layer, ids in r.items():
                    for e in ids:
                        self.tok_uses.setdefault((layer, e), []).append(self.tok_index[i])
        for kind, layer, ids in events:
            if kind == "H":
                self.on_hint(layer, ids)
            elif kind == "A":
                self.on_access(layer, ids[0])
            elif kind == "P" and self.la > 0:
                self.on_prefetch(layer, ids)
        return self.c


def csv(s, cast):
    return [cast(x) for x in s.split(",") if x != ""]


def configs(a):
    """Every (slots, policy, half-life, lookahead, read-ahead ranks, gate) asked for."""
    for slots in csv(a.slots, int):
        for pol in a.policy.split(","):
            for hl in csv(a.half_life, float) if pol == "lfu-history" else [0]:
                for la in csv(a.lookahead, int):
                    for st in csv(a.started, int) if la > 0 else [64]:
                        for gate in csv(a.gate, float) if la > 0 else [0.0]:
                            yield slots, pol, hl, la, st, gate


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--slots", default="307,1112")
    ap.add_argument("--lookahead", default="0,6,8")
    ap.add_argument("--policy", default="lfru,lru,lfru-exact,lfu-history")
    ap.add_argument("--gate", default="0", help="prefetch gates to try (precision thresholds, 0 = off)")
    ap.add_argument("--prior", type=float, default=1.0,
                    help="precision assumed for a (layer, rank) with fewer than --warmup guesses scored")
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--started", default="64",
                    help="top-ranked guesses read before their layer routes (WASTE_SPEC_RANKS); "
                         "the others are read only if picked, dropped unread if not (64 = read all)")
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--half-life", default="16", help="lfu-history half-lives, in accesses per slot")
    ap.add_argument("--spec-hits", type=int, default=1, help="hit count a lookahead record starts with")
    ap.add_argument("--no-protect", action="store_true",
                    help="plain replacement for lookahead records (the engine protects unused guesses "
                         "until their layer routes and evicts wrong guesses first)")
    ap.add_argument("--protect-resident", action="store_true",
                    help="a lookahead guess already resident is also kept until its layer routes")
    ap.add_argument("--horizon", type=int, default=1,
                    help="policy horizon: tokens after the current one whose routing the oracle knows")
    ap.add_argument("--precision", action="store_true", help="print the lookahead's precision per rank")
    ap.add_argument("--prior-tokens", type=int, default=0,
                    help="routing traces: the first N tokens are not replayed; their per-record use "
                         "counts seed reuse-odds (uses so far = the count, last use = at open), as a "
                         "hotlist from an earlier run would for every record it lists")
    ap.add_argument("--skip-tokens", type=int, default=0,
                    help="routing traces: the first N tokens are not replayed and seed nothing "
                         "(the baseline for --prior-tokens N)")
    ap.add_argument("--late-hits", action="store_true",
                    help="count a guess demanded before its read started as a hit (the reference's "
                         "claim-based count; default: a miss, since it is read only then)")
    a = ap.parse_args()
    if a.prior_tokens and a.skip_tokens:
        ap.error("--prior-tokens and --skip-tokens exclude each other")
    prior = {}
    ev = load(a.trace, a.prior_tokens or a.skip_tokens, prior)
    if a.skip_tokens:
        prior = {}
    future = Future(ev)
    n_layers = max(1, len({l for k, l, ids in ev if k == "H"}))
    decode_tokens = sum(1 for k, l, ids in ev if k == "H" and len(ids) <= a.top_k) / n_layers
    if a.precision:
        sim = Sim(1, "lfru", 64, a.top_k)
        for kind, layer, ids in ev:
            if kind == "P":
                sim.guess[layer] = ids
            elif kind == "H" and len(ids) <= a.top_k:
                sim.learn(layer, ids)
        ranks = max((r for _, r in sim.right), default=-1) + 1
        cum = 0
        for r in range(ranks):
            ok = sum(v[0] for (l, rr), v in sim.right.items() if rr == r)
            n = sum(v[1] for (l, rr), v in sim.right.items() if rr == r)
            cum += ok
            print(f"rank {r + 1:2d}: {100 * ok / max(1, n):5.1f}%  cumulative {100 * cum / max(1, n * (r + 1)):5.1f}%")
    print(f"{'slots':>6} {'policy':>12} {'hl':>3} {'look':>4} {'read':>4} {'gate':>5} {'hit%':>6} {'decode%':>8} "
          f"{'misses':>7} {'spec':>6} {'used':>6} {'reads/tok':>9} {'MB/tok':>7}")
    for slots, pol, hl, la, st, gate in configs(a):
        c = Sim(slots, pol, la, a.top_k, a.spec_hits, not a.no_protect, gate, hl, future,
                a.prior, a.warmup, st)
        c.late_is_miss = not a.late_hits
        c.protect_resident = a.protect_resident
        c.horizon = a.horizon
        for k, n in prior.items():
            c.hz.last[k] = 0
            c.hz.cnt[k] = n
        c = c.run(ev)
        tot = c["hit"] + c["miss"]
        dt = c["dhit"] + c["dmiss"]
        reads_tok = (c["dmiss"] + c["dspec"]) / max(1, decode_tokens)
        print(f"{slots:>6} {pol:>12} {hl:>3g} {la:>4} {st:>4} {gate:>5g} {100 * c['hit'] / tot:6.1f} "
              f"{100 * c['dhit'] / max(1, dt):8.1f} {c['miss']:>7} {c['spec']:>6} "
              f"{c['spec_used']:>6} {reads_tok:9.1f} {reads_tok * RECORD_MB:7.0f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
