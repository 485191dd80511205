// The 22 accepted/refused cpu lists of ENGINE.md §6.3.
#include "platform/cpu_list.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace waste::platform {
namespace {

struct Accepted {
  const char* text;
  std::vector<int> cpus;
};

class CpuListAccepted : public ::testing::TestWithParam<Accepted> {};

TEST_P(CpuListAccepted, Parses) {
  Result<std::vector<int>> got = ParseCpuList(GetParam().text);
  ASSERT_TRUE(got.has_value()) << "\"" << GetParam().text << "\": " << got.error().ToString();
  EXPECT_EQ(*got, GetParam().cpus);
}

INSTANTIATE_TEST_SUITE_P(Spec, CpuListAccepted,
                         ::testing::Values(Accepted{"0", {0}}, Accepted{"3", {3}},
                                           Accepted{"0-5", {0, 1, 2, 3, 4, 5}},
                                           Accepted{"0-2,6-8", {0, 1, 2, 6, 7, 8}},
                                           Accepted{"2,2,2", {2}}, Accepted{"5-5", {5}},
                                           Accepted{" 0 - 2 , 4 ", {0, 1, 2, 4}},
                                           Accepted{"1023", {1023}}));

class CpuListRefused : public ::testing::TestWithParam<const char*> {};

TEST_P(CpuListRefused, IsArgError) {
  Result<std::vector<int>> got = ParseCpuList(GetParam());
  ASSERT_FALSE(got.has_value()) << "\"" << GetParam() << "\" was accepted";
  EXPECT_EQ(got.error().code(), Errc::kArg);
  EXPECT_NE(got.error().message().find("not a cpu list"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Spec, CpuListRefused,
                         ::testing::Values("",                        // empty
                                           " \t",                     // blanks only
                                           ",",                       // lone comma
                                           "0,",                      // trailing comma
                                           "0,,1",                    // doubled comma
                                           "-1",                      // leading '-'
                                           "0-",                      // open range
                                           "5-0",                     // backwards range
                                           "0..3",                    // not a range
                                           "0 3",                     // missing comma
                                           "a",                       // letters
                                           "3x",                      // suffix junk
                                           "1024",                    // too large
                                           "99999999999999999999"));  // overflow

TEST(CpuList, RangesAndSinglesMergeSorted) {
  Result<std::vector<int>> got = ParseCpuList("8,0-2,1");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, (std::vector<int>{0, 1, 2, 8}));
}

}  // namespace
}  // namespace waste::platform
