#include "grammar/json_schema_bounds.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace waste::schema {
namespace {

// The largest integer the schema rules can spell: 18 digits.
constexpr unsigned long long kMaxInteger = 999'999'999'999'999'999ULL;
constexpr int kMaxDigits = 18;

std::string Join(const std::vector<std::string>& alts) {
  if (alts.empty()) return "never";
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

// A GBNF literal of digits (and '.'), built by appending (GCC 12 warns
// falsely about `"literal" + std::string` chains: -Wrestrict).
std::string Quoted(const std::string& text) {
  std::string out(1, '"');
  out += text;
  out += '"';
  return out;
}

std::string DigitClass(char from, char to) {
  if (from == to) return std::string("\"") + from + "\"";
  if (from == '0' && to == '9') return "[0-9]";
  return std::string("[") + from + "-" + to + "]";
}

std::string FreeDigits(size_t n) {
  if (n == 0) return "";
  if (n == 1) return "[0-9]";
  return "[0-9]{" + std::to_string(n) + "}";
}

// Space-separated sequence, empty parts skipped ("" when all are empty).
std::string Seq(std::initializer_list<std::string> parts) {
  std::string out;
  for (const std::string& p : parts) {
    if (p.empty()) continue;
    out += (out.empty() ? "" : " ") + p;
  }
  return out;
}

// The texts between `a` and `b` inclusive, both of the same length (digits
// after the first may be zeros: this is also used for the tail of a number).
std::string SameLength(const std::string& a, const std::string& b) {
  const size_t n = a.size();
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  const std::string prefix = i > 0 ? Quoted(a.substr(0, i)) : std::string();
  if (i == n) return prefix;
  const std::string ra = a.substr(i + 1), rb = b.substr(i + 1);
  const size_t m = ra.size();
  const bool a_zeros = ra.find_first_not_of('0') == std::string::npos;
  const bool b_nines = rb.find_first_not_of('9') == std::string::npos;
  char from = a[i], to = b[i];
  std::vector<std::string> alts;
  if (!a_zeros) {
    alts.push_back(Seq({DigitClass(from, from), SameLength(ra, std::string(m, '9'))}));
    ++from;
  }
  if (!b_nines) --to;
  if (from <= to) alts.push_back(Seq({DigitClass(from, to), FreeDigits(m)}));
  if (!b_nines) alts.push_back(Seq({DigitClass(b[i], b[i]), SameLength(std::string(m, '0'), rb)}));
  return Seq({prefix, Join(alts)});
}

}  // namespace

std::string NonNegativeIntegers(unsigned long long lo, std::optional<unsigned long long> hi) {
  if (hi && *hi > kMaxInteger) hi.reset();
  if (lo > kMaxInteger || (hi && lo > *hi)) return "never";
  const std::string los = std::to_string(lo);
  std::vector<std::string> alts;
  if (!hi) {
    alts.push_back(SameLength(los, std::string(los.size(), '9')));
    if (los.size() < static_cast<size_t>(kMaxDigits)) {
      size_t more = los.size();  // free digits after a leading 1-9: from len(lo) on
      alts.push_back("[1-9] [0-9]{" + std::to_string(more) + "," + std::to_string(kMaxDigits - 1) + "}");
    }
    return Join(alts);
  }
  const std::string his = std::to_string(*hi);
  for (size_t d = los.size(); d <= his.size(); ++d) {
    std::string a = d == los.size() ? los : std::string(d - 1, '0').insert(0, 1, '1');
    std::string b = d == his.size() ? his : std::string(d, '9');
    alts.push_back(SameLength(a, b));
  }
  return Join(alts);
}

namespace {

// Values >= 0 within [lo, hi] (lo >= 0; each end inclusive or not).
std::string NonNegative(long double lo, bool lo_ex, std::optional<long double> hi, bool hi_ex,
                        bool integral) {
  const long double lo_floor = std::floor(static_cast<long double>(lo));
  const bool lo_whole = lo_floor == lo;
  // Integers: from the least one in range.
  long double first = lo_ex ? lo_floor + 1 : std::ceil(static_cast<long double>(lo));
  std::optional<long double> last;
  if (hi) last = hi_ex ? std::ceil(static_cast<long double>(*hi)) - 1 : std::floor(static_cast<long double>(*hi));
  auto integers = [&](long double a, std::optional<long double> b) -> std::string {
    if (a > static_cast<long double>(kMaxInteger)) return "never";
    if (b && *b < a) return "never";
    std::optional<unsigned long long> ub;
    if (b && *b <= static_cast<long double>(kMaxInteger)) ub = static_cast<unsigned long long>(*b);
    return NonNegativeIntegers(static_cast<unsigned long long>(a), ub);
  };
  std::vector<std::string> alts;
  if (std::string i = integers(first, last); i != "never") {
    // A number may write a whole value with zeros after the point (3.0).
    alts.push_back(integral ? i : Seq({i, "(\".\" \"0\"{1,15})?"}));
  }
  if (!integral) {
    // I.f lies in [I, I+1): inside when lo <= I (lo < I if exclusive) and
    // I + 1 <= hi. Fractions have at most 15 digits; below an exclusive
    // whole hi, the last I's fraction keeps within 15 significant digits,
    // so that no text reads back (in double precision, as clients check)
    // as hi itself.
    std::optional<long double> frac_last;
    if (hi) frac_last = std::floor(static_cast<long double>(*hi)) - 1;
    const bool tight_top = hi && hi_ex && std::floor(*hi) == *hi && frac_last && *frac_last >= 0;
    auto precise = [](long double i) {
      const int digits = static_cast<int>(std::to_string(static_cast<unsigned long long>(i)).size());
      return std::max(1, 15 - digits);
    };
    std::optional<long double> bulk_last = frac_last;
    if (tight_top) bulk_last = *frac_last - 1;
    if (std::string i = integers(first, bulk_last); i != "never") {
      alts.push_back(Seq({i, "\".\"", "[0-9]{1,15}"}));
    }
    if (tight_top && *frac_last >= first && *frac_last <= static_cast<long double>(kMaxInteger)) {
      alts.push_back(Seq({Quoted(std::to_string(static_cast<unsigned long long>(*frac_last))), "\".\"",
                          "[0-9]{1," + std::to_string(precise(*frac_last)) + "}"}));
    }
    // An exclusive whole lower bound with a fraction that is not zero: its
    // first nonzero digit within 15 significant digits (so that the text
    // does not read back as lo), then any digits (only zeros when lo + 1
    // is an exclusive hi: the tail could otherwise round up to it).
    if (lo_ex && lo_whole && (!frac_last || lo_floor <= *frac_last) &&
        lo_floor <= static_cast<long double>(kMaxInteger)) {
      const int k = precise(lo_floor);
      const bool capped = tight_top && lo_floor == *frac_last;
      alts.push_back(Seq({Quoted(std::to_string(static_cast<unsigned long long>(lo_floor)) + '.'),
                          k > 1 ? "[0-9]{0," + std::to_string(k - 1) + "}" : "", "[1-9]",
                          capped ? "\"0\"{0,14}" : "[0-9]{0,14}"}));
    }
  }
  return Join(alts);
}

}  // namespace

std::string BoundedNumber(const NumberBounds& b, bool integral) {
  std::vector<std::string> alts;
  // v >= 0: [max(lo, 0), hi].
  const bool any_non_negative = !b.hi || *b.hi > 0 || (*b.hi == 0 && !b.hi_exclusive);
  if (any_non_negative) {
    long double lo = 0;
    bool lo_ex = false;
    if (b.lo && *b.lo >= 0) lo = *b.lo, lo_ex = b.lo_exclusive;
    if (std::string e = NonNegative(lo, lo_ex, b.hi, b.hi_exclusive, integral); e != "never") {
      alts.push_back(e);
    }
  }
  // v < 0 as "-" and its magnitude m = -v in (0, -lo] above max(-hi, 0).
  const bool any_negative = !b.lo || *b.lo < 0;
  if (any_negative) {
    long double mlo = 0;
    bool mlo_ex = true;  // m > 0 ("-0" is not spelled)
    if (b.hi && *b.hi < 0) mlo = -*b.hi, mlo_ex = b.hi_exclusive;
    std::optional<long double> mhi;
    if (b.lo) mhi = -*b.lo;
    if (std::string e = NonNegative(mlo, mlo_ex, mhi, b.lo_exclusive, integral); e != "never") {
      alts.push_back(Seq({"\"-\"", e}));
    }
  }
  return Join(alts);
}

}  // namespace waste::schema
