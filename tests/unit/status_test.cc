// Status and Result: how failures travel, and what a caller's mistake does.
#include <gtest/gtest.h>

#include <new>
#include <stdexcept>
#include <string>

#include "base/exception_status.h"
#include "waste/status.h"

namespace waste {
namespace {

// Out of memory stays out of memory whatever the boundary was doing; a
// host tells "free some RAM" from "fix the file" by the code.
TEST(StatusFromException, AllocationFailureIsOutOfMemory) {
  Status s = StatusFromException(std::bad_alloc(), Errc::kFormat, "manifest.json: cannot parse");
  EXPECT_EQ(s.code(), Errc::kOom);
  EXPECT_EQ(s.message(), "manifest.json: cannot parse");
  Status arr = StatusFromException(std::bad_array_new_length(), Errc::kIo, "session");
  EXPECT_EQ(arr.code(), Errc::kOom);
}

TEST(StatusFromException, OtherExceptionsKeepTheBoundarysCode) {
  Status s = StatusFromException(std::runtime_error("bad"), Errc::kFormat, "x: bad");
  EXPECT_EQ(s.code(), Errc::kFormat);
  EXPECT_EQ(s.message(), "x: bad");
  EXPECT_EQ(StatusFromException(std::out_of_range("k"), Errc::kIo, "y").code(), Errc::kIo);
}

TEST(Result, CarriesAValueOrAStatus) {
  Result<int> v = 7;
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, 7);
  Result<int> e = ArgError("--ctx: must be positive");
  ASSERT_FALSE(e.has_value());
  EXPECT_EQ(e.error().code(), Errc::kArg);
  EXPECT_EQ(e.error().ToString(), std::string(ErrcText(Errc::kArg)) + ": --ctx: must be positive");
}

// value() on an error is a bug in the caller; the library never throws, so
// it ends the process rather than raising std::bad_variant_access.
TEST(ResultDeathTest, ValueOfAnErrorEndsTheProcessInsteadOfThrowing) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Result<int> e = IoError("disk");
        int x = e.value();
        (void)x;
      },
      "");
}

}  // namespace
}  // namespace waste
