// JSON Schema's numeric bounds (minimum, maximum, exclusiveMinimum,
// exclusiveMaximum) as GBNF: the decimal texts of the integers in a range,
// built digit by digit (a range of equal-length numbers is a few
// alternatives of a fixed prefix, one digit class and free digits), and
// numbers with a fraction whose every value lies inside the bounds.
//
// Sound, not complete, where a bound is fractional or a value would need
// an exponent: every text the grammar allows satisfies the bounds, but a
// number may be written only as an integer or as `int.frac` whose integer
// part already keeps it inside (for `minimum: 0.5` the values from 1 on;
// no exponents). The texts stay within the 18 integer digits the schema's
// plain `integer` and `number` rules allow, and fractions within 15 digits
// (a longer one next to a bound, 2.9999999999999999 below 3, reads back as
// the bound itself in double precision, which is how clients check).
#pragma once

#include <optional>
#include <string>

namespace waste::schema {

struct NumberBounds {
  std::optional<long double> lo, hi;  // absent: unbounded on that side
  bool lo_exclusive = false, hi_exclusive = false;
};

// A GBNF expression for a JSON integer (`integral`) or number within `b`;
// "never" when no value fits.
std::string BoundedNumber(const NumberBounds& b, bool integral);

// The decimal texts (no sign, no leading zeros) of the integers lo..hi,
// both >= 0 (hi absent: no upper bound). Exposed for the tests.
std::string NonNegativeIntegers(unsigned long long lo, std::optional<unsigned long long> hi);

}  // namespace waste::schema
