#!/usr/bin/env python3
"""Offline expert-cache replacement study.

Replays a trace written by the engine with WASTE_CACHE_TRACE=FILE (one line
per event: `H layer ids...` a routing hint, `P layer ids...` the router
lookahead's ranked guesses for the next MoE layer, `A layer expert` a demand
access) through a model of src/expert_cache.cc, for several cache sizes,
policies and lookahead depths. Timing is not modelled (reads land at once),
so hit rates are what the engine gets when reads keep up.

  cache_sim.py TRACE --slots 307,1112 --lookahead 0,6,8,12 --policy lfru,lru,lfru-exact

Record the trace with the largest lookahead you want to study
(WASTE_LOOKAHEAD=16): shorter lookaheads use a prefix of the guesses.
"""
import argparse
import sys


def load(path):
    events = []
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) < 2:
                continue
            events.append((p[0], int(p[1]), [int(x) for x in p[2:]]))
    return events


class Sim:
    def __init__(self, slots, policy, lookahead, top_k, spec_hits=1, protect=False):
        self.protect = protect
        self.n = slots
        self.policy = policy
        self.la = lookahead
        self.top_k = top_k
        self.spec_hits = spec_hits
        self.key = [None] * slots         # slot -> (layer, expert)
        self.hits = [0] * slots
        self.last = [0] * slots
        self.pins = [0] * slots
        self.spec = [False] * slots       # loaded by lookahead, not yet used
        self.spec_gen = [0] * slots       # hints seen when it was guessed
        self.hint_seq = 0
        self.index = {}
        self.free = list(range(slots - 1, -1, -1))
        self.clock = 0
        self.rng = 0x9E3779B9
        self.freq = {}
        self.hint = []                    # [expert, slot, state, miss]
        self.hint_layer = -1
        self.cursor = 0
        self.outstanding = 0
        self.window = max(1, min(64, slots // 2))
        self.c = dict(hit=0, miss=0, dhit=0, dmiss=0, spec=0, spec_used=0, ev=0)
        self.decode = False
        self.order = {}                   # MoE layer -> position in a token
        self.tokens = {}                  # MoE layer -> hints seen

    def stale(self, s):
        # An unused lookahead record whose layer has been routed: a wrong guess.
        return self.spec[s] and self.spec_gen[s] != self.hint_seq

    def pending(self, s):
        # An unused lookahead record whose layer has not been routed yet.
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

    def better(self, a, b):
        if self.policy == "next-use":
            sa, sb = self.stale(a), self.stale(b)
            if sa != sb:
                return sa
            return self.next_use(a) > self.next_use(b)
        if self.protect:
            sa, sb = self.stale(a), self.stale(b)
            if sa != sb:
                return sa
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
        if self.policy in ("lfru-exact", "lfu-history", "next-use"):
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

    def count(self, hit):
        self.c["hit" if hit else "miss"] += 1
        if self.decode:
            self.c["dhit" if hit else "dmiss"] += 1

    def issue(self, e):
        k = (self.hint_layer, e[0])
        s = self.index.get(k)
        if s is not None:
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

    def on_hint(self, layer, ids):
        for e in self.hint:
            if e[2] == 1:
                self.pins[e[1]] -= 1
        self.decode = len(ids) <= self.top_k
        if layer not in self.order:
            self.order[layer] = len(self.order)
        self.tokens[layer] = self.tokens.get(layer, 0) + 1
        self.hint = [[x, -1, 0, False] for x in ids]
        self.hint_layer = layer
        self.hint_seq += 1
        self.cursor = 0
        self.outstanding = 0
        self.issue_hints()

    def on_access(self, layer, expert):
        self.clock += 1
        k = (layer, expert)
        self.freq[k] = self.freq.get(k, 0) + 1
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
                self.last[s] = self.clock
                if self.spec[s]:
                    self.c["spec_used"] += 1
                    self.spec[s] = False
                self.issue_hints()
                return
        s = self.index.get(k)
        if s is not None:
            self.count(True)
            self.hits[s] += 1
            self.last[s] = self.clock
            if self.spec[s]:
                self.c["spec_used"] += 1
                self.spec[s] = False
            return
        self.count(False)
        s = self.victim()
        self.claim(s, k, 1)

    def on_prefetch(self, layer, ids):
        for x in ids[: self.la]:
            k = (layer, x)
            if k in self.index:
                continue
            s = self.victim()
            self.claim(s, k, self.spec_hits)
            self.spec[s] = True
            self.spec_gen[s] = self.hint_seq
            self.c["spec"] += 1

    def run(self, events):
        for kind, layer, ids in events:
            if kind == "H":
                self.on_hint(layer, ids)
            elif kind == "A":
                self.on_access(layer, ids[0])
            elif kind == "P" and self.la > 0:
                self.on_prefetch(layer, ids)
        return self.c


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--slots", default="307,1112")
    ap.add_argument("--lookahead", default="0,6,8")
    ap.add_argument("--policy", default="lfru,lru,lfru-exact,lfu-history")
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--spec-hits", type=int, default=1, help="hit count a lookahead record starts with")
    ap.add_argument("--protect", action="store_true",
                    help="never evict an unused lookahead record before its layer routes; evict wrong guesses first")
    a = ap.parse_args()
    ev = load(a.trace)
    print(f"{'slots':>6} {'policy':>12} {'look':>4} {'hit%':>6} {'decode%':>8} {'misses':>7} {'spec':>6} {'used':>6} {'reads/tok':>9}")
    decode_tokens = sum(1 for k, l, ids in ev if k == "H" and len(ids) <= a.top_k) / max(
        1, len({l for k, l, ids in ev if k == "H"}))
    for slots in [int(x) for x in a.slots.split(",")]:
        for pol in a.policy.split(","):
            for la in [int(x) for x in a.lookahead.split(",")]:
                c = Sim(slots, pol, la, a.top_k, a.spec_hits, a.protect).run(ev)
                tot = c["hit"] + c["miss"]
                dt = c["dhit"] + c["dmiss"]
                reads_tok = (c["dmiss"] + c["spec"]) / max(1, decode_tokens)
                print(f"{slots:>6} {pol:>12} {la:>4} {100*c['hit']/tot:6.1f} {100*c['dhit']/max(1,dt):8.1f} "
                      f"{c['miss']:>7} {c['spec']:>6} {c['spec_used']:>6} {reads_tok:9.1f}")
                sys.stdout.flush()


if __name__ == "__main__":
    main()
